"""R18: IndexFile.put() stores the slot before it raises ``count``; a lookup in between sees
slot == count, stops the chain walk, and misses every older entry of that slot."""

from tidemq.store import Message
from tidemq.store import index_file
from tidemq.store.index_file import key_hash
from tidemq.testing.faulty_io import FaultyFileIO

from .conftest import small_cfg


def test_query_by_key_while_a_colliding_key_is_indexed(stores, monkeypatch):
    slots = 16
    s = stores(small_cfg(index_slots=slots), FaultyFileIO())
    other = next(f"n{i}" for i in range(10_000) if key_hash(f"T#n{i}") % slots == key_hash("T#old") % slots)
    assert s.put(Message("T", b"acknowledged long ago", keys=["old"])).ok
    real = index_file.SLOT
    seen = []

    class SlotThenReader:
        size = real.size

        def unpack_from(self, *a):
            return real.unpack_from(*a)

        def pack_into(self, *a):
            real.pack_into(*a)
            if not seen:                        # the writer is preempted here; a reader runs
                seen.append(s.query_by_key("T", "old"))

    monkeypatch.setattr(index_file, "SLOT", SlotThenReader())
    assert s.put(Message("T", b"new", keys=[other])).ok
    assert len(seen[0]) == 1, "the old, acknowledged message was not found"
