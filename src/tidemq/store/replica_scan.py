"""A follower's one pass over a frame of the leader's log: the check that comes before the write
and what the dispatch needs, together (replica.py writes and dispatches with it).

``scan(data, offset, segment_size, deleted, want_index)``: ``data`` is the log's bytes from
``offset``. The check: whole, intact records within one segment, a BLANK only last, ending that
segment (given whole, or by its 8-byte header alone: ``ReplicaLog.read_span``'s way), every record
saying it is where it is and naming an ASCII topic; ReplicaError saying what is wrong otherwise
(``check``). Record CRCs are checked where records are read, as for any record. What the dispatch
needs, as the put path builds it (record_loop.py): per consume queue -- (topic, queue id) in the
order the frame's records first name them -- the queue offset of its first record and its 20-byte
units (consume_queue.UNIT: physical offset, size, tags hash of TAGS), and the index items
(index_file.HASHED_ITEM: the hash of b"<topic>#<key>" for each key of KEYS, then of UNIQ_KEY, with
the record's physical offset); records of a topic deleted after them (``deleted``: topic -> the log
offset its deletion was at, TopicTable.deleted) are left out. ``groups`` is None when a queue's
records in the frame do not follow each other (the dispatch is made from the log then).

Per record: no Python object (a unit appended, an item appended) in the compiled pass
(tidemq._accel.replica_scan, accel_c/replica.c); ``py_scan`` is its twin, and runs for the frames
the compiled pass leaves to it (a property value that is not UTF-8: decoded with replacement,
as prop_value does; more topics or queues than it tracks) and when the compiled module is not there.
"""

from __future__ import annotations

from ..accel import ACCEL
from ..record import codec
from ..record.codec import BLANK_MAGIC, MAGIC, OFF_PHYSICALOFFSET, OFF_STORETIMESTAMP, SIZE_MAGIC
from ..record.crc import crc32
from .consume_queue import UNIT
from .index_file import HASHED_ITEM

OK, CROSSES, BLANK_NOT_END, NOT_WHOLE, DAMAGED, OTHER_OFFSET, TOPIC, TWIN = range(8)
_TAGS, _KEYS, _UNIQ = (codec.prop_name(n) for n in (codec.PROP_TAGS, codec.PROP_KEYS, codec.PROP_UNIQ_KEY))
_HEAD = __import__("struct").Struct(">ii4xi4xq")      # TOTALSIZE, MAGIC, QUEUEID, QUEUEOFFSET
assert codec.OFF_QUEUEID == 12


class ReplicaError(Exception):
    """Bytes a follower refuses to write (not at its log's end, damaged, not whole records)."""


def py_scan(data, offset: int, segment_size: int, deleted: dict | None, want_index: bool):
    """(code, at, last store timestamp, ends segment, groups, index items): code OK or what is
    wrong at ``at`` (an offset in ``data``); groups [(topic, queue id, first queue offset, units)]
    or None; index items a bytearray (None unless ``want_index``; groups and items None when the
    code is not OK). ``deleted`` None: the check alone (groups and items None). Twin of tidemq._accel.replica_scan
    (which may answer TWIN: this function's frame)."""
    if deleted is not None and type(deleted) is not dict:
        raise TypeError("deleted must be a dict or None")
    if offset < 0 or segment_size <= 0:
        raise ValueError("offset must be >= 0 and segment_size > 0")
    limit = segment_size - offset % segment_size          # room left in the segment
    contiguous = deleted is not None                      # (None: the check alone)
    index = bytearray() if want_index and contiguous else None
    n = len(data)
    if n > limit:
        return CROSSES, 0, 0, False, None, None
    groups: dict = {}
    prefix: dict = {}
    pos, last_ts = 0, 0
    unit_pack, item_pack = UNIT.pack, HASHED_ITEM.pack
    while pos < n:
        size, magic = SIZE_MAGIC.unpack_from(data, pos) if pos + 8 <= n else (0, 0)
        if magic == BLANK_MAGIC:
            if pos + size != n and pos + SIZE_MAGIC.size != n or size != limit - pos:
                return BLANK_NOT_END, pos, last_ts, False, None, None
            return OK, pos, last_ts, True, _listed(groups) if contiguous else None, index
        if magic != MAGIC or pos + size > n:
            return NOT_WHOLE, pos, last_ts, False, None, None
        if codec.check_record(data, pos, n, verify_crc=False)[0] != codec.REC_OK:
            return DAMAGED, pos, last_ts, False, None, None
        phys = offset + pos
        if codec.I64.unpack_from(data, pos + OFF_PHYSICALOFFSET)[0] != phys:
            return OTHER_OFFSET, pos, last_ts, False, None, None
        blen = codec.I32.unpack_from(data, pos + codec.OFF_BODYLEN)[0]
        t0 = pos + codec.OFF_BODY + blen + 1
        tlen = data[t0 - 1]
        raw_topic = bytes(data[t0:t0 + tlen])
        if not raw_topic.isascii():
            return TOPIC, pos, last_ts, False, None, None
        last_ts = codec.I64.unpack_from(data, pos + OFF_STORETIMESTAMP)[0]
        at = pos
        pos += size
        if not contiguous:
            continue
        topic = raw_topic.decode("ascii")
        if phys < deleted.get(topic, -1):
            continue                                      # a deleted topic's record
        p0 = t0 + tlen + 2
        plen = data[p0 - 2] << 8 | data[p0 - 1]
        props = codec.seek_properties(bytes(data[p0:p0 + plen])) if plen else b""
        _, _, qid, qoff = _HEAD.unpack_from(data, at)
        g = groups.get((topic, qid))
        if g is None:
            g = groups[(topic, qid)] = [qoff, bytearray()]
        elif qoff != g[0] + len(g[1]) // UNIT.size:
            contiguous = False
            continue
        g[1] += unit_pack(phys, size, codec.tags_hash(codec.prop_value(props, _TAGS)) if plen else 0)
        if index is not None and plen:
            ks = codec.prop_value(props, _KEYS)
            uniq = codec.prop_value(props, _UNIQ)
            pc = prefix.get(topic)
            if pc is None:
                pc = prefix[topic] = crc32(raw_topic + b"#")
            for k in (*(ks.split(codec.KEY_SEP) if ks else ()), uniq):
                if k:
                    index += item_pack(crc32(k.encode("utf-8"), pc) & 0x7FFFFFFF, phys)
    return OK, pos, last_ts, False, _listed(groups) if contiguous else None, index


def _listed(groups: dict) -> list:
    return [(topic, qid, g[0], g[1]) for (topic, qid), g in groups.items()]


_compiled = getattr(ACCEL, "replica_scan", None)


def scan(data, offset: int, segment_size: int, deleted: dict | None, want_index: bool):
    """py_scan, compiled when tidemq.accel has it (its TWIN frames go to py_scan)."""
    if _compiled is not None:
        r = _compiled(data, offset, segment_size, deleted, want_index)
        if r[0] != TWIN:
            return r
    return py_scan(data, offset, segment_size, deleted, want_index)


def check(data, offset: int, segment_size: int, deleted: dict | None = None, want_index: bool = False):
    """scan, and ReplicaError saying what is wrong when the frame is not one to write."""
    r = scan(data, offset, segment_size, {} if deleted is None else deleted, want_index)
    code, at = r[0], offset + r[1]
    if code == OK:
        return r
    seg_start = offset - offset % segment_size
    raise ReplicaError({
        CROSSES: f"{len(data)} bytes at {offset} cross the end of segment {seg_start}",
        BLANK_NOT_END: f"BLANK at {at} does not end segment {seg_start}",
        NOT_WHOLE: f"no whole record at {at}",
        DAMAGED: f"damaged record at {at} (its lengths do not check)",
        OTHER_OFFSET: f"record at {at} says it is at another offset",
        TOPIC: f"record at {at} names a topic that is not ASCII"}[code])
