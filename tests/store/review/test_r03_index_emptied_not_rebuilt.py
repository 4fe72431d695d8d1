"""R03: an emptied index/ directory (or index files removed as unreadable while others
remain) is not rebuilt, contrary to the recovery docstring."""

from tidemq.store import Message
from tidemq.testing.faulty_io import FaultyFileIO

from .conftest import ROOT, small_cfg


def test_emptied_index_directory_is_rebuilt_from_the_log(stores):
    cfg = small_cfg()
    fio = FaultyFileIO()
    s = stores(cfg, fio)
    for i in range(10):
        assert s.put(Message("T", b"m%d" % i, keys=[f"k{i}"])).ok
    assert len(s.query_by_key("T", "k3")) == 1
    s.shutdown()
    for p in [p for p in fio.files if p.startswith(ROOT + "/index/")]:
        fio.unlink(p)                                          # index/ is still there, empty
    s = stores(cfg, fio)
    assert [len(s.query_by_key("T", f"k{i}")) for i in range(10)] == [1] * 10
