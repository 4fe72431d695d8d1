"""spark/plan.py: offsets and partitions of a read, planned over a real store's files (FileBackend,
no Spark): earliest / latest / JSON / timestamps per queue, ranges split per partition, offsets
cleaned away (an error, skipped, or read from the archive), a trigger's row limit and its cap."""

import json
import os

import pytest

from tidemq.io import ManualClock
from tidemq.spark.backend import DataLossError, FileBackend
from tidemq.spark.plan import (EARLIEST, LATEST, Range, cap, flag, int_option, limit_rows, ranges, resolve,
                               topics_of)
from tidemq.store import Message, MessageStore, StoreConfig

T0_MS = 1_700_000_000_000


def config(root):
    return StoreConfig(root_dir=str(root), segment_size_bytes=64 * 1024, index_enabled=False,
                       file_reserved_time_hours=0, delete_when="")


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    """Topic A, 2 queues: offsets 0-1 of each stored at T0, 2-4 a minute later; topic Old, 1 queue of
    600 messages whose first two segments were deleted (as cleanup does)."""
    root = tmp_path_factory.mktemp("plan") / "store"
    clock = ManualClock(T0_MS)
    s = MessageStore(config(root), clock=clock).start()
    s.create_topic("A", 2)
    s.create_topic("Old", 1)
    assert s.put_batch([Message("Old", b"m%05d" % i + b"." * 500) for i in range(600)]).all_ok()
    assert s.put_batch([Message("A", b"early") for _ in range(4)]).all_ok()
    clock.advance(60)
    assert s.put_batch([Message("A", b"late") for _ in range(6)]).all_ok()
    s.shutdown()
    segs = sorted(n for n in os.listdir(root / "commitlog") if n.isdigit())
    assert len(segs) >= 4
    for name in segs[:2]:                       # Old's first records, not A's
        os.remove(root / "commitlog" / name)
    b = FileBackend(str(root))
    yield b
    b.close()


def test_earliest_and_latest(backend):
    assert resolve(backend, ["A"], "earliest", None, LATEST) == {"A": {"0": 0, "1": 0}}
    assert resolve(backend, ["A"], "latest", None, EARLIEST) == {"A": {"0": 5, "1": 5}}
    assert resolve(backend, ["A"], None, None, LATEST) == {"A": {"0": 5, "1": 5}}, "no spec: the default"


def test_a_json_spec_names_queues_and_leaves_the_rest_to_the_default(backend):
    spec = json.dumps({"A": {"0": 3, "1": EARLIEST}})
    assert resolve(backend, ["A"], spec, None, LATEST) == {"A": {"0": 3, "1": 0}}
    assert resolve(backend, ["A"], json.dumps({"A": {"1": 2}}), None, LATEST) == {"A": {"0": 5, "1": 2}}


def test_an_ending_offset_past_a_queues_end_is_an_error_naming_the_option(backend):
    spec = json.dumps({"A": {"0": 6}})
    with pytest.raises(ValueError, match="endingOffsets asks for A queue 0 up to 6, past its end 5"):
        resolve(backend, ["A"], spec, None, LATEST, name="endingOffsets")
    assert resolve(backend, ["A"], spec, None, LATEST) == {"A": {"0": 6, "1": 5}}, "a start may be ahead"


@pytest.mark.parametrize("spec", ["soon", "[1, 2]", '{"A": 3}', "{"])
def test_a_spec_that_is_no_offsets_is_a_clear_error(backend, spec):
    with pytest.raises(ValueError, match="offsets must be 'earliest', 'latest' or JSON"):
        resolve(backend, ["A"], spec, None, LATEST)


def test_a_timestamp_picks_the_first_message_stored_at_or_after_it(backend):
    assert resolve(backend, ["A"], None, T0_MS, LATEST) == {"A": {"0": 0, "1": 0}}
    assert resolve(backend, ["A"], None, T0_MS + 30_000, LATEST) == {"A": {"0": 2, "1": 2}}
    assert resolve(backend, ["A"], None, T0_MS + 3_600_000, LATEST) == {"A": {"0": 5, "1": 5}}
    spec = json.dumps({"A": {"1": 4}})                  # a queue the spec names keeps its offset
    assert resolve(backend, ["A"], spec, T0_MS + 30_000, LATEST) == {"A": {"0": 2, "1": 4}}


def test_earliest_of_a_cleaned_queue_is_what_is_left_or_zero_with_the_archive(backend):
    first, end = backend.queue_range("Old", 0)
    assert 0 < first < end == 600
    assert resolve(backend, ["Old"], "earliest", None, LATEST) == {"Old": {"0": first}}
    assert resolve(backend, ["Old"], "earliest", None, LATEST, tiered=True) == {"Old": {"0": 0}}


def test_ranges_are_split_per_partition_and_empty_ones_left_out(backend):
    start = {"A": {"0": 1, "1": 5}}
    end = {"A": {"0": 5, "1": 5}}
    assert ranges(backend, start, end, True, 2) == [Range("A", 0, 1, 3), Range("A", 0, 3, 5)]
    assert ranges(backend, {}, {"A": {"0": 3}}, True, 100) == [Range("A", 0, 0, 3)], "a queue new since start"


def test_offsets_cleaned_away_fail_or_are_skipped_or_come_from_the_archive(backend):
    first, _ = backend.queue_range("Old", 0)
    start, end = {"Old": {"0": 0}}, {"Old": {"0": 600}}
    with pytest.raises(DataLossError, match=f"offsets \\[0, {first}\\) of Old queue 0 are no longer in the store"):
        ranges(backend, start, end, True, 1000)
    assert ranges(backend, start, end, False, 1000) == [Range("Old", 0, first, 600)]
    tiered = ranges(backend, start, end, True, 1000, tiered=True)
    assert tiered == [Range("Old", 0, 0, first, True), Range("Old", 0, first, 600)]


def test_a_row_limit_shares_the_backlog_and_moves_every_queue():
    start = {"A": {"0": 0, "1": 10, "2": 7}}
    latest = {"A": {"0": 90, "1": 20, "2": 7}}
    assert limit_rows(start, latest, 1000) is latest
    limited = limit_rows(start, latest, 10)
    assert limited == {"A": {"0": 9, "1": 11, "2": 7}}
    assert limit_rows({}, {"A": {"0": 100, "1": 1}}, 4) == {"A": {"0": 3, "1": 1}}


def test_cap_keeps_offsets_at_or_below_the_target():
    assert cap({"A": {"0": 9, "1": 3}, "B": {"0": 4}}, {"A": {"0": 5, "1": 8}}) == \
        {"A": {"0": 5, "1": 3}, "B": {"0": 0}}


def test_options():
    assert topics_of({"topics": " A, B ,,"}) == ["A", "B"] and topics_of({"topic": "C"}) == ["C"]
    with pytest.raises(ValueError, match="'topic'"):
        topics_of({"topics": " , "})
    assert flag({}, "failOnDataLoss", True) is True and flag({"x": "FALSE"}, "x", True) is False
    with pytest.raises(ValueError, match="option x must be true or false, not 'yes'"):
        flag({"x": "yes"}, "x", True)
    assert int_option({"n": "12"}, "n", None) == 12 and int_option({"n": ""}, "n", 3) == 3
    with pytest.raises(ValueError, match="option n must be an integer, not '1e3'"):
        int_option({"n": "1e3"}, "n", None)
