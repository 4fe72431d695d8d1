"""The send dedup window: two generations of tables of (topic, message id) keys -> (queue offset,
commit-log offset, transaction id); a batch looked up and remembered by its keys; the keys keyed by
this process's random SipHash key."""

import numpy as np

from tidemq.broker.produce import dedup
from tidemq.broker.produce.dedup import KEY_BYTES, DedupWindow


def test_dedup_window_generations():
    w = DedupWindow(4)
    for k, v in (("a", 1), ("b", 2), ("c", 3)):
        w.put("T", k, v, 100 + v)
    w.put("U", "a", 9, 109, "txn")
    assert w.get("T", "a") == (1, 101, "") and w.get("U", "a") == (9, 109, "txn") and w.get("U", "b") is None
    w.put("T", "d", 4, 104)
    w.put("T", "e", 5, 105)                             # the first generation is full: still remembered
    assert w.get("T", "a") == (1, 101, "") and w.get("U", "a") == (9, 109, "txn") and len(w) == 6
    for k, v in (("f", 6), ("g", 7), ("h", 8), ("i", 9)):
        w.put("T", k, v, 100 + v)
    assert w.get("T", "a") is None and w.get("T", "e") == (5, 105, "")   # at least the last 4 are there
    off = DedupWindow(0)
    off.put("T", "a", 1, 1)
    assert off.get("T", "a") is None and off.find_keys(DedupWindow.key("T", "a")) == {}


def _keys(topic, ids):
    return b"".join(DedupWindow.key(topic, i) if i is not None else bytes(KEY_BYTES) for i in ids)


def test_a_batch_is_looked_up_and_remembered_by_its_keys():
    w = DedupWindow(100)
    ids = [f"m{i}" for i in range(10)]
    keys = _keys("T", ids)
    assert w.find_keys(keys) == {}
    stored = np.array([i % 3 != 0 for i in range(10)])       # 0, 3, 6, 9 were not stored
    w.put_keys(keys, np.arange(100, 110), np.arange(1000, 1010), stored)
    again = _keys("T", [*ids, None, "other"])
    assert w.find_keys(again) == {i: (100 + i, 1000 + i, "") for i in range(10) if i % 3 != 0}
    assert w.find_keys(_keys("U", ids)) == {}                # the same ids in another topic
    w.put_keys(keys[:KEY_BYTES], np.array([7]), np.array([70]))   # a key already there takes the new offsets
    assert w.get("T", "m0") == (7, 70, "") and len(w) == 7


def test_a_batch_bigger_than_a_generation_keeps_its_last_entries():
    w = DedupWindow(8)
    ids = [f"m{i}" for i in range(20)]
    w.put_keys(_keys("T", ids), np.arange(20), np.arange(20) * 10)
    found = w.find_keys(_keys("T", ids))
    assert set(range(12, 20)) <= set(found) and all(found[i] == (i, 10 * i, "") for i in found) and len(w) <= 16


def test_the_window_keys_are_keyed():
    """SipHash-2-4-128 under this process's random key (tests/test_accel.py checks it against known
    answers): the same (topic, id) has another key under another key, so nothing outside the process
    can compute one (Murmur3 with seed 0, before, let anyone craft an id colliding with another's)."""
    assert len(dedup.KEY) == 16 and dedup.KEY != bytes(16)
    mine = dedup.py_id_hash(dedup.KEY, b"orders", b"01AB")
    assert mine == DedupWindow.key("orders", "01AB")
    assert dedup.py_id_hash(bytes(range(16)), b"orders", b"01AB") != mine
    assert dedup.py_id_hash(dedup.KEY, b"junk", b"01AB") != mine, "the topic is part of the key"
    h1, h2 = dedup.siphash128(dedup.KEY, b"orders\0" + b"01AB")
    assert mine == dedup._KEY.pack(h1, h2)
