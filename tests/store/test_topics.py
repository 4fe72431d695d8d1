"""The topic table: names and queue counts in config/topics.json, written atomically."""

from __future__ import annotations

import errno
import json

import pytest

from tidemq import checked
from tidemq.store import StoreError
from tidemq.store.topics import TopicTable
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import NothingUnsyncedSurvives

CONFIG = "/r/config"


def table(fio: FaultyFileIO) -> TopicTable:
    t = TopicTable(fio, CONFIG)
    t.load()
    return t


def raw(fio: FaultyFileIO, name: str = "topics.json") -> bytes:
    h = fio.open(f"{CONFIG}/{name}")
    try:
        return bytes(fio.pread(h, fio.size_of(h), 0))
    finally:
        fio.close(h)


def saved(fio: FaultyFileIO) -> dict:
    return checked.decode(raw(fio))


def put(fio: FaultyFileIO, name: str, data: bytes) -> None:
    h = fio.open(f"{CONFIG}/{name}", create=True)
    fio.truncate(h, 0)
    fio.pwrite(h, data, 0)
    fio.close(h)


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


def test_a_flipped_digit_is_recognised_and_the_mirror_is_used():
    """A deleted topic's end read 9 times too far hid the messages of the topic made again after
    it (and a retention so flipped had cleanup delete messages early): the file is a checked
    document, the damaged one set aside, its mirror (the version in effect) used."""
    fio = FaultyFileIO()
    t = table(fio)
    t.create("D", 2)
    t.delete("D", 1234)
    t.create("T", 4)                                     # the last change: T made
    data = raw(fio)
    assert b'"D":1234' in data
    put(fio, "topics.json", data.replace(b'"D":1234', b'"D":9234'))
    t2 = table(fio)
    assert t2.deleted == {"D": 1234}, "never the flipped end"
    assert t2.get("T").queue_count == 4, "the mirror: the version in effect"
    assert t2.damaged == 1 and fio.exists(CONFIG + "/topics.json.damaged")
    t2.create("U", 1)
    assert table(fio).deleted == {"D": 1234} and table(fio).get("U").queue_count == 1


@pytest.mark.parametrize("damage", [b"", b"\x00" * 40, b'{"topics": {"T": {"queue_count": 100000000}}}',
                                    b'{"topics": {"T": {"queue_count": 2}}, "deleted": {"D": -5}}',
                                    b'{"topics": ["T"]}'])
def test_a_damaged_file_with_an_intact_previous_version_is_never_a_refused_start(damage):
    fio = FaultyFileIO()
    t = table(fio)
    t.create("A", 3)
    t.create("B", 2)
    put(fio, "topics.json", damage)
    t2 = table(fio)
    assert {n: s.queue_count for n, s in t2.topics.items()} == {"A": 3, "B": 2}


def test_with_no_intact_copy_the_start_is_refused_and_the_files_stay_for_the_operator():
    fio = FaultyFileIO()
    t = table(fio)
    t.create("A", 3)
    t.create("B", 2)
    put(fio, "topics.json", b"garbage")
    put(fio, "topics.json.bak", b"more garbage")
    for _ in range(2):                                   # the same at the next start: nothing was moved
        with pytest.raises(StoreError, match="topics.json is unreadable"):
            table(fio)
    assert raw(fio) == b"garbage"


def test_a_file_of_the_plain_format_before_is_read():
    fio = FaultyFileIO()
    fio.makedirs(CONFIG)
    put(fio, "topics.json", json.dumps({"topics": {"T": {"queue_count": 4}}, "deleted": {"D": 7}}).encode())
    t = table(fio)
    assert t.get("T").queue_count == 4 and t.deleted == {"D": 7}
    t.create("U", 1)
    assert saved(fio)["topics"]["U"] == {"queue_count": 1}


def test_a_save_that_fails_midway_keeps_the_previous_version():
    """A full disk when the new version is written: the version before stays readable (its .bak),
    and the topic the save was for is not made."""
    fio = FaultyFileIO()
    t = table(fio)
    t.create("A", 3)
    fio.fail("pwrite", errno.ENOSPC, path_contains="topics.json.tmp", written=10)
    with pytest.raises(OSError):
        t.create("B", 2)
    assert t.get("B") is None
    assert {n: s.queue_count for n, s in table(fio).topics.items()} == {"A": 3}
