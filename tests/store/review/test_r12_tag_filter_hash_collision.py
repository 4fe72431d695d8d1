"""R12: get(tags=[...]) builds {hash: tag}; two requested tags with the same hash keep only
one, and messages with the other requested tag are filtered out (and skipped: next_offset
moves past them)."""

from tidemq.store import Message, codec
from tidemq.testing.faulty_io import FaultyFileIO

from .conftest import small_cfg


def test_two_requested_tags_with_the_same_hash(stores):
    assert codec.tags_hash("Aa") == codec.tags_hash("BB")
    s = stores(small_cfg(), FaultyFileIO())
    s.put(Message("T", b"1", tags="Aa"))
    s.put(Message("T", b"2", tags="BB"))
    g = s.get("g", "T", 0, 0, tags=["Aa", "BB"])
    assert [m.body for m in g.messages] == [b"1", b"2"]
