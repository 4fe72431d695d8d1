"""The send dedup window: two generations of tables of (topic, message id) keys -> (offset,
transaction id); a batch looked up and remembered by its keys."""

import numpy as np

from tidemq.broker.produce import dedup
from tidemq.broker.produce.dedup import KEY_BYTES, DedupWindow


def test_dedup_window_generations():
    w = DedupWindow(4)
    for k, v in (("a", 1), ("b", 2), ("c", 3)):
        w.put("T", k, v)
    w.put("U", "a", 9, "txn")
    assert w.get("T", "a") == (1, "") and w.get("U", "a") == (9, "txn") and w.get("U", "b") is None
    w.put("T", "d", 4)
    w.put("T", "e", 5)                                  # the first generation is full: still remembered
    assert w.get("T", "a") == (1, "") and w.get("U", "a") == (9, "txn") and len(w) == 6
    for k, v in (("f", 6), ("g", 7), ("h", 8), ("i", 9)):
        w.put("T", k, v)
    assert w.get("T", "a") is None and w.get("T", "e") == (5, "")   # at least the last 4 are there
    off = DedupWindow(0)
    off.put("T", "a", 1)
    assert off.get("T", "a") is None and off.find_keys(DedupWindow.key("T", "a")) == {}


def _keys(topic, ids):
    return b"".join(DedupWindow.key(topic, i) if i is not None else bytes(KEY_BYTES) for i in ids)


def test_a_batch_is_looked_up_and_remembered_by_its_keys():
    w = DedupWindow(100)
    ids = [f"m{i}" for i in range(10)]
    keys = _keys("T", ids)
    assert w.find_keys(keys) == {}
    stored = np.array([i % 3 != 0 for i in range(10)])       # 0, 3, 6, 9 were not stored
    w.put_keys(keys, np.arange(100, 110), stored)
    again = _keys("T", [*ids, None, "other"])
    assert w.find_keys(again) == {i: (100 + i, "") for i in range(10) if i % 3 != 0}
    assert w.find_keys(_keys("U", ids)) == {}                # the same ids in another topic
    w.put_keys(keys[:KEY_BYTES], np.array([7]))               # a key already there takes the new offset
    assert w.get("T", "m0") == (7, "") and len(w) == 7


def test_a_batch_bigger_than_a_generation_keeps_its_last_entries():
    w = DedupWindow(8)
    ids = [f"m{i}" for i in range(20)]
    w.put_keys(_keys("T", ids), np.arange(20))
    found = w.find_keys(_keys("T", ids))
    assert set(range(12, 20)) <= set(found) and all(found[i] == (i, "") for i in found) and len(w) <= 16


def test_the_window_keys_are_murmur3_x64_128():
    # MurmurHash3_x64_128, seed 0, as the reference implementation (the mmh3 package) gives them
    assert dedup.murmur3_128(b"") == (0, 0)
    assert dedup.murmur3_128(b"hello") == (14688674573012802306, 6565844092913065241)
    assert dedup.murmur3_128(b"abcdefghijklmnopqrstuvwxyz0123456789") == (17463111482660052538, 4149707753321764032)
    assert dedup.murmur3_128(b"z" * 17) == (1197921854538287573, 10605294805930500215)
    assert dedup.py_id_hash(b"T", b"m") == dedup._KEY.pack(*dedup.murmur3_128(b"T\0m"))
