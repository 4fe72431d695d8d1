"""R10: shutdown() closes segments (MappedFile.close ignores holders), consume-queue handles
(HandleCache.close_all closes handles in use) and index files while readers are inside
get()/query_by_key(): the reader gets a bare ValueError/TypeError/EBADF (or, with fd reuse,
reads another file)."""

import threading

from tidemq.io import ManualClock, OsFileIO
from tidemq.store import Message, MessageStore, codec

from .conftest import small_cfg


def test_get_racing_shutdown_answers_without_raising(tmp_path, monkeypatch):
    s = MessageStore(small_cfg(root_dir=str(tmp_path / "store")), fio=OsFileIO(), clock=ManualClock()).start()
    try:
        for i in range(5):
            assert s.put(Message("T", b"m%d" % i)).ok
        real = codec.decode_record
        fired = []

        def decode_then_shutdown(buf, pos, size=None):
            if not fired:                       # the reader holds the segment; another thread shuts down
                fired.append(1)
                t = threading.Thread(target=s.shutdown)
                t.start()
                t.join()
            return real(buf, pos, size)

        monkeypatch.setattr(codec, "decode_record", decode_then_shutdown)
        try:
            s.get("g", "T", 0, 0)
        except Exception as e:                  # noqa: BLE001
            raise AssertionError(f"get raised {e!r} while the store shut down") from e
    finally:
        s.shutdown()
