"""R11: IndexService.lookup() iterates a snapshot of the index files without holding them;
the clean service destroys (unmaps) an old file in between and query_by_key raises."""

from tidemq.io import ManualClock
from tidemq.store import Message
from tidemq.store import index_file
from tidemq.testing.faulty_io import FaultyFileIO

from .conftest import small_cfg


def test_query_by_key_racing_index_cleanup(stores, monkeypatch):
    clock = ManualClock()
    s = stores(small_cfg(segment_size_bytes=8 * 1024, index_slots=16, index_entries=16), FaultyFileIO(), clock)
    i = 0
    while len(s.segments) < 4:
        assert s.put(Message("T", b"x" * 1000, keys=[f"k{i}"])).ok
        i += 1
    assert len(s.index.files) == 2
    clock.advance(73 * 3600)
    s.trigger_delete_expired()
    real = index_file.IndexFile.lookup
    fired = []

    def lookup_racing_clean(self, *a):
        if not fired:                           # the clean service's round runs between two index files
            fired.append(1)
            s.clean()
        return real(self, *a)

    monkeypatch.setattr(index_file.IndexFile, "lookup", lookup_racing_clean)
    try:
        s.query_by_key("T", f"k{i - 1}")
    except Exception as e:                      # noqa: BLE001
        raise AssertionError(f"query_by_key raised {e!r}") from e
