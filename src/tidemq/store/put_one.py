"""The one-message put's common case in one call: the broker's common SendMessage (one message,
ASYNC_FLUSH, no followers) put with no PutResults, Prepared tuple or record loop around it.

    got = put_one(t, body, props, mf, born_ms, born_host, sys_flag, now_ms, store_host, index, reserved,
                  max_body, max_record)

is ``StoreWriter.put_encoded(topic, [(body, props)], born_ms, born_host, sys_flag, defer_dispatch=True)``
where it would append this one record into ``mf`` (the log's last segment), for a caller holding
the put lock that found the store taking puts (``refusal()`` None), the log not failing, ``mf`` not
full and its directory online (StoreWriter.put_one). ``born_host``: 8 bytes; ``index``: the store
indexes keys; ``reserved``: validate.ENCODED_RESERVED; ``max_body``, ``max_record``: the store's bounds.

Taken: the record written at ``mf.wrote_pos`` (its queue round-robin over the topic's write_ids, the
queue offset taken, the body CRC, the record CRC), ``mf.wrote_pos`` / ``last_store_timestamp_ms``
and the topic's next offset and round-robin counter moved; returned: (the dispatch entry for
PutLock.defer -- units, index items as index_file.HASHED_ITEM bytes, store time, the record's offset,
the log's end --, the queue offset). None, having changed nothing, wherever put_encoded would do
anything else (a refusal of a check, a record that does not fit in the rest of the segment: a roll,
a topic with no queue to write, keys that index nothing): the caller puts it through put_encoded.

Two implementations with one contract: ``tidemq._accel.put_one`` (compiled, accel_c/put_one.c) and
``py_put_one`` here; ``put_one`` is the one tidemq.accel selected. tests/store/test_put_one.py holds
them to each other and the put to put_encoded (the same bytes, offsets, dispatch and answers).
"""

from __future__ import annotations

from ..accel import ACCEL
from ..record import codec
from ..record.codec import BLANK_MIN, CRC_DIGITS_BACK, MAGIC, OFF_BODY, RECORD_CRC_TAIL, record_struct
from ..record.crc import crc32
from .consume_queue import UNIT
from .index_file import HASHED_ITEM
from .validate import I32, I64, py_check_encoded

_TAIL = len(RECORD_CRC_TAIL)


def _field(v, bounds) -> bool:
    return type(v) is int and bounds[0] <= v <= bounds[1]


def py_put_one(t, body, props, mf, born_ms, born_host, sys_flag, now_ms, store_host, index, reserved,
               max_body, max_record):
    if len(born_host) != 8 or len(store_host) != 8:
        raise ValueError("put_one: hosts are 8 bytes")
    if type(body) is not bytes or type(props) is not bytes:
        return None
    if (born_ms is not None and not _field(born_ms, I64)) or not _field(sys_flag, I32):
        return None
    bl, pl = len(body), len(props)
    if bl > max_body or pl > codec.USER_PROPERTIES_MAX_BYTES:
        return None
    why, _name, th, uniq, keys = py_check_encoded(props, reserved)
    if why:
        return None
    topic = t.name_bytes
    tl = len(topic)
    if bl > max_record - codec.FIXED_OVERHEAD - _TAIL - tl - pl:
        return None
    ids = t.write_ids
    if not ids:
        return None
    q = ids[t.rr % len(ids)]
    if not 0 <= q < t.queue_count:
        return None
    cq, qoff = t.queues[q], t.next_offsets[q]       # (both now: the segment's attributes are read below)
    if qoff < 0:
        return None
    pos, size, start = mf.wrote_pos, mf.size, mf.start_offset
    if pos < 0 or start < 0 or size < 0:
        return None                          # (a negative place: pack_into would count it from the end)
    full = props + RECORD_CRC_TAIL
    s = record_struct(bl, tl, len(full))
    n = s.size
    if n > size - BLANK_MIN - pos:
        return None                          # a roll: put_encoded's
    phys = start + pos
    items = bytearray()
    if index and (keys or uniq):
        prefix = crc32(topic + b"#")
        for k in (*(keys.split(codec.KEY_SEP) if keys else ()), uniq or ""):
            if k:
                items += HASHED_ITEM.pack(crc32(k.encode("utf-8"), prefix) & 0x7FFFFFFF, phys)
        if not items:
            return None                      # keys of spaces only: put_encoded's way
    buf = mf.mapping
    s.pack_into(buf, pos, n, MAGIC, crc32(body) & 0x7FFFFFFF, q, 0, qoff, phys, sys_flag, born_ms or now_ms,
                born_host, now_ms, store_host, 0, 0, bl, body, tl, topic, len(full), full)
    end = pos + n
    tcrc = crc32(buf[pos + OFF_BODY + bl:end - CRC_DIGITS_BACK])
    buf[end - CRC_DIGITS_BACK:end - 1] = b"%010d" % crc32(buf[pos:pos + OFF_BODY], tcrc)
    mf.wrote_pos = end
    mf.last_store_timestamp_ms = now_ms
    t.rr += 1
    t.next_offsets[q] = qoff + 1
    units = {cq: [qoff, bytearray(UNIT.pack(phys, n, th))]}
    return (units, items, now_ms, phys, phys + n), qoff


put_one = ACCEL.put_one if ACCEL is not None else py_put_one
