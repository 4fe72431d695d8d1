"""R13: a head segment the cleaner could not delete because a reader held it is marked
unavailable; when the reader releases it the mapping is closed but the file stays in the
log. If the next rounds have no trigger (space freed), the segment is neither deleted nor
readable: get() silently skips its messages (status FOUND, next_offset past them)."""

import time

from tidemq.io import ManualClock
from tidemq.store import Message
from tidemq.testing.faulty_io import FaultyFileIO

from .conftest import small_cfg


def test_segment_is_either_in_the_log_and_readable_or_deleted(stores):
    clock = ManualClock()
    hour = time.localtime(clock.now_ms() / 1000).tm_hour
    cfg = small_cfg(segment_size_bytes=8 * 1024, delete_when="%02d" % ((hour + 12) % 24))
    fio = FaultyFileIO()
    s = stores(cfg, fio, clock)
    while len(s.segments) < 3:
        assert s.put(Message("T", b"x" * 1000)).ok
    head = s.segments.first
    assert head.hold()                                     # a reader is reading the head segment
    fio.capacity_bytes = int(fio.disk_usage("/").used_bytes / 0.87)   # above clean-forcibly, below warning
    s.clean()
    assert "held" in (s.cleaner.last.why_not or "")
    head.release()                                         # the reader is done
    fio.capacity_bytes = 1 << 40                           # space is no longer short
    s.clean()
    s.check_disk()
    deleted = s.segments.min_offset > 0
    g = s.get("g", "T", 0, 0)
    readable = bool(g.messages) and g.messages[0].queue_offset == 0
    assert deleted or readable, (f"segment {head.path} is still the head of the log but unreadable: "
                                 f"get(0) -> {g}, first queue offset returned "
                                 f"{g.messages[0].queue_offset if g.messages else None}")
