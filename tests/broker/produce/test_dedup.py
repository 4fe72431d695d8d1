"""The send dedup window: two generations of (topic, message id) -> (offset, transaction id)."""

from tidemq.broker.produce.dedup import DedupWindow


def test_dedup_window_generations():
    w = DedupWindow(4)
    w.put_many("T", [("a", 1), ("b", 2), ("c", 3)])
    w.put("U", "a", 9, "txn")
    assert w.get("T", "a") == (1, "") and w.get("U", "a") == (9, "txn") and w.get("U", "b") is None
    w.put_many("T", [("d", 4), ("e", 5)])               # the first generation is full: still remembered
    assert w.get("T", "a") == (1, "") and len(w) == 6
    w.put_many("T", [("f", 6), ("g", 7), ("h", 8), ("i", 9)])
    assert w.get("T", "a") is None and w.get("T", "e") == (5, "")   # at least the last 4 are there
    off = DedupWindow(0)
    off.put("T", "a", 1)
    assert off.get("T", "a") is None
