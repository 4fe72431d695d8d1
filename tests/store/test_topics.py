"""The topic table: names and queue counts in config/topics.json, written atomically."""

from __future__ import annotations

import json

import pytest

from tidemq.store import StoreError
from tidemq.store.topics import TopicTable
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import NothingUnsyncedSurvives

CONFIG = "/r/config"


def table(fio: FaultyFileIO) -> TopicTable:
    t = TopicTable(fio, CONFIG)
    t.load()
    return t


def saved(fio: FaultyFileIO) -> dict:
    h = fio.open(CONFIG + "/topics.json")
    return json.loads(fio.pread(h, fio.size_of(h), 0))


def test_created_topics_are_saved_and_loaded_back():
    fio = FaultyFileIO()
    t = table(fio)
    assert t.get("T") is None
    a = t.create("T", 4)
    assert (a.name, a.queue_count, a.next_offsets) == ("T", 4, [0, 0, 0, 0])
    t.create("%DLQ%g", 1)
    assert saved(fio) == {"topics": {"%DLQ%g": {"queue_count": 1}, "T": {"queue_count": 4}}}
    t2 = table(fio)
    assert {n: s.queue_count for n, s in t2.topics.items()} == {"T": 4, "%DLQ%g": 1}


def test_a_topic_grows_and_never_shrinks():
    fio = FaultyFileIO()
    t = table(fio)
    t.create("T", 2)
    t.topics["T"].next_offsets[1] = 7
    grown = t.create("T", 5)
    assert grown is t.topics["T"] and grown.queue_count == 5 and grown.next_offsets == [0, 7, 0, 0, 0]
    assert len(grown.queues) == 5
    assert t.create("T", 1).queue_count == 5
    assert saved(fio)["topics"]["T"]["queue_count"] == 5


@pytest.mark.parametrize("name, queues", [("bad topic!", 1), ("", 1), ("x" * 128, 1), ("T", 0)])
def test_bad_names_and_counts_are_refused(name, queues):
    t = table(FaultyFileIO())
    with pytest.raises(ValueError):
        t.create(name, queues)
    assert t.topics == {}


def test_an_unreadable_file_is_a_clear_error():
    fio = FaultyFileIO()
    fio.makedirs(CONFIG)
    h = fio.open(CONFIG + "/topics.json", create=True)
    fio.pwrite(h, b'{"topics": {"T": {"queue_count": "many"', 0)
    with pytest.raises(StoreError, match="topics.json is unreadable"):
        table(fio)


def test_after_a_power_loss_the_file_is_the_old_or_the_new_version():
    fio = FaultyFileIO()
    t = table(fio)
    t.create("A", 1)
    t.create("B", 2)                               # durable on return: written atomically
    fio = fio.after_power_loss(NothingUnsyncedSurvives())
    assert {n: s.queue_count for n, s in table(fio).topics.items()} == {"A": 1, "B": 2}
