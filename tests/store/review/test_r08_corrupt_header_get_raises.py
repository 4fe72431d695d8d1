"""R08: a record kept by recovery although invalid (corruption below the durable offset) makes
get() raise CodecError instead of answering a status; the queue cannot be read past it
from any offset before it."""

from tidemq.store import Message
from tidemq.testing.faulty_io import FaultyFileIO

from .conftest import ROOT, small_cfg


def test_get_over_a_kept_corrupt_record_answers_a_status(stores):
    cfg = small_cfg()
    fio = FaultyFileIO()
    s = stores(cfg, fio)
    rs = [s.put(Message("T", b"m%02d" % i + b"x" * 200)) for i in range(30)]
    s.shutdown()
    fio.files[ROOT + "/commitlog/" + "0" * 20].data[rs[10].commitlog_offset + 4] ^= 0xFF   # MAGIC bit rot
    s = stores(cfg, fio)
    assert s.recovery.problems                   # kept and reported, as designed
    try:
        g = s.get("g", "T", 0, 0, max_count=32)
    except Exception as e:                       # noqa: BLE001
        raise AssertionError(f"get raised {e!r}") from e
    assert len(g.messages) >= 10
