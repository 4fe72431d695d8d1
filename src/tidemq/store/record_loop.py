"""The append's per-record loop: prepared messages packed into a segment, one record after the
other, each sealed with its record CRC (codec.py), its consume-queue unit and index keys
collected, its outcome written into the batch's result arrays (types.PutResults).

    next, pos, error = append(batch, start, buf, pos, limit, base, now_ms, store_host, units,
                              index_items, res_phys, res_size, res_qid, res_qoff, res_uniq)

``batch[start:]`` (commit_log.Prepared tuples) is packed into ``buf`` from ``pos`` while a record
ends at or before ``limit`` (the segment's size less the room kept for a BLANK). Returned: the
index of the first item not packed (``len(batch)``: all), the position after the last record
packed, and None, or the exception that stopped the loop at that item (nothing of it written).
Per item packed: the queue id (when None: round-robin over the topic's ``write_ids``, all its
queues or, for a topic spread over several broker groups, the ones this store's group owns) and
the queue offset are taken from its TopicState, the record is written, ``units[cq]`` (``[first queue
offset, bytearray of 20-byte units]``) and ``index_items`` ((keys, physical offset), for items
with keys) are extended, and at its message index ``i = item[0]``: ``res_phys[i]``,
``res_size[i]``, ``res_qid[i]``, ``res_qoff[i]``, ``res_uniq[i]``. A body CRC or a tail CRC of
None is computed here.

Two implementations with one contract: ``tidemq._accel.append`` (compiled, src/tidemq/accel_c/write.c)
and ``py_append`` here; ``append`` is the one tidemq.accel selected. tests/test_accel.py holds
them to the same bytes and outcomes.
"""

from __future__ import annotations

from ..accel import ACCEL
from ..crc import crc32
from .codec import CRC_DIGITS_BACK, MAGIC, OFF_BODY, RECORD_STRUCTS, record_struct
from .consume_queue import UNIT


def py_append(batch, start, buf, pos, limit, base, now_ms, store_host, units, index_items,
              res_phys, res_size, res_qid, res_qoff, res_uniq):
    structs = RECORD_STRUCTS
    unit_pack = UNIT.pack
    units_get = units.get
    off_body, back = OFF_BODY, CRC_DIGITS_BACK
    k = start
    try:
        for k in range(start, len(batch)):
            (i, body, t, props, qid, born_ts, born_host, flag, sys_flag, reconsume, prep_tx, crc, th, ik,
             uniq, tcrc) = batch[k]
            topic = t.name_bytes
            bl, tl, pl = len(body), len(topic), len(props)
            s = structs.get((bl, tl, pl)) or record_struct(bl, tl, pl)
            n = s.size
            if pos + n > limit:
                return k, pos, None
            if crc is None:
                crc = crc32(body) & 0x7FFFFFFF
            if qid is None:                 # round-robin over the queues the topic takes puts in
                ids = t.write_ids
                if not ids:
                    raise ValueError("the topic has no queue to write (empty write_ids)")
                q = ids[t.rr % len(ids)]
                rr = t.rr + 1
                if not 0 <= q < t.queue_count:
                    raise ValueError("queue id outside the topic's queues")
            else:
                q, rr = qid, t.rr
                if not 0 <= q < t.queue_count:
                    raise ValueError("queue id outside the topic's queues")
            offsets = t.next_offsets
            qoff = offsets[q]
            phys = base + pos
            # pack first: a field that cannot be packed stops the loop before anything changed
            s.pack_into(buf, pos, n, MAGIC, crc, q, flag, qoff, phys, sys_flag, born_ts, born_host, now_ms,
                        store_host, reconsume, prep_tx, bl, body, tl, topic, pl, props)
            end = pos + n    # the record CRC (see codec): crc32(header, crc32(tail))
            if tcrc is None:        # the tail's CRC: TOPICLEN up to the digits
                tcrc = crc32(buf[pos + off_body + bl:end - back])
            buf[end - back:end - 1] = b"%010d" % crc32(buf[pos:pos + off_body], tcrc)
            t.rr = rr
            offsets[q] = qoff + 1
            cq = t.queues[q]
            u = units_get(cq)
            if u is None:
                units[cq] = [qoff, bytearray(unit_pack(phys, n, th))]
            else:
                u[1] += unit_pack(phys, n, th)
            if ik is not None:
                index_items.append((ik, phys))
            res_phys[i] = phys
            res_size[i] = n
            res_qid[i] = q
            res_qoff[i] = qoff
            res_uniq[i] = uniq
            pos = end
    except Exception as e:  # noqa: BLE001 - the item that cannot be packed stops the loop: the caller says why
        return k, pos, e
    return len(batch), pos, None


append = ACCEL.append if ACCEL is not None else py_append
