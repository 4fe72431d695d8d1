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
from ..record.crc import crc32
from ..record.codec import (CRC_DIGITS_BACK, MAGIC, OFF_BODY, PROP_UNIQ_KEY, RECORD_CRC_TAIL, RECORD_CRC_TAIL_LEN,
                    RECORD_STRUCTS, record_struct)
from .consume_queue import UNIT
from .index_file import HASHED_ITEM


def _done(units: dict, cq, qoff: int, unit: bytes, i: int, values: tuple, results: tuple) -> None:
    """A record went in: its consume-queue unit added to ``units``, its outcome (physical offset,
    size, queue id, queue offset) written at message index ``i`` of the result arrays."""
    u = units.get(cq)
    if u is None:
        units[cq] = [qoff, bytearray(unit)]
    else:
        u[1] += unit
    for arr, v in zip(results, values):
        arr[i] = v


def py_append(batch, start, buf, pos, limit, base, now_ms, store_host, units, index_items,
              res_phys, res_size, res_qid, res_qoff, res_uniq):
    structs = RECORD_STRUCTS
    unit_pack = UNIT.pack
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
            if ik is not None:
                index_items.append((ik, phys))
            _done(units, t.queues[q], qoff, unit_pack(phys, n, th), i, (phys, n, q, qoff),
                  (res_phys, res_size, res_qid, res_qoff))
            res_uniq[i] = uniq
            pos = end
    except Exception as e:  # noqa: BLE001 - the item that cannot be packed stops the loop: the caller says why
        return k, pos, e
    return len(batch), pos, None


append = ACCEL.append if ACCEL is not None else py_append


# append_slices ------------------------------------------------------------------------------------
SLICE_FIELDS = 10             # per message in ``fields``: offsets of id, tags, keys, properties, body; their lengths
UNIQ_PROP = f"{PROP_UNIQ_KEY}\x01".encode()
PROPERTIES_I16_MAX = 32767


def slice_properties_len(li, lt, lk, lp, extra_len: int, tail: int = RECORD_CRC_TAIL_LEN):
    """The record properties' length of a message of append_slices, the record-CRC tail (``tail``)
    included; ints, or numpy arrays of a batch's lengths (writer.put_slices)."""
    return lp + len(UNIQ_PROP) + li + 1 + extra_len + lt + 6 * (lt > 0) + lk + 6 * (lk > 0) + tail


def py_append_slices(data, fields, order, start, tags_hashes, buf, pos, limit, base, now_ms, store_host, t, extra,
                     units, index_items, index_prefix_crc, res_phys, res_size, res_qid, res_qoff, born_ms, born_host,
                     sys_flag):
    """``append`` for messages given as slices of one buffer (writer.put_slices): message
    i = order[k] for k from ``start`` is the record of topic ``t`` (round-robin over its write_ids)
    with born timestamp ``born_ms``, born host ``born_host`` (8 bytes), sys flag ``sys_flag``, flag,
    reconsume times and transaction offset 0, and the properties: its user properties, UNIQ_KEY = its id, ``extra``,
    TAGS and KEYS when it has them, the record-CRC tail. ``fields`` (uint32, SLICE_FIELDS per
    message): the offsets in ``data`` of its id, tags, keys, properties and body, then their
    lengths; ``tags_hashes[i]`` (int64) goes into its unit. With ``index_prefix_crc`` >= 0 (crc32 of
    b"<topic>#"), its index items (index_file.HASHED_ITEM: the hash of each key, then of the id)
    are appended to ``index_items``. Returns as ``append`` does. Twin of tidemq._accel.append_slices."""
    if len(born_host) != 8:
        raise ValueError("append_slices: buffers of the wrong size")
    F = memoryview(fields).cast("B").cast("I")
    O = memoryview(order).cast("B").cast("q")
    TH = memoryview(tags_hashes).cast("B").cast("q")
    nmsg = len(F) // SLICE_FIELDS
    unit_pack, item_pack = UNIT.pack, HASHED_ITEM.pack
    topic = t.name_bytes
    tl = len(topic)
    off_body, back = OFF_BODY, CRC_DIGITS_BACK
    k = start
    try:
        for k in range(start, len(O)):
            i = O[k]
            if not 0 <= i < nmsg:
                raise IndexError("message index outside the fields")
            f = F[SLICE_FIELDS * i:SLICE_FIELDS * (i + 1)]
            if any(f[j] + f[5 + j] > len(data) for j in range(5)):
                raise ValueError("a field outside the data")
            li, lt, lk, lp, lb = f[5:10]
            pl = slice_properties_len(li, lt, lk, lp, len(extra))
            if pl > PROPERTIES_I16_MAX or lb > (1 << 31) - 1 - 1024 - pl:
                raise ValueError("properties must fit 32767 bytes")
            s = RECORD_STRUCTS.get((lb, tl, pl)) or record_struct(lb, tl, pl)
            n = s.size
            if pos + n > limit:
                return k, pos, None
            ids = t.write_ids
            if not ids:
                raise ValueError("the topic has no queue to write (empty write_ids)")
            q = ids[t.rr % len(ids)]
            if not 0 <= q < t.queue_count:
                raise ValueError("queue id outside the topic's queues")
            qoff = t.next_offsets[q]
            phys = base + pos
            mid, tg, ks, ps, body = (bytes(data[f[j]:f[j] + f[5 + j]]) for j in range(5))
            props = b"".join((ps, UNIQ_PROP, mid, b"\x02", extra, b"TAGS\x01" + tg + b"\x02" if tg else b"",
                              b"KEYS\x01" + ks + b"\x02" if ks else b"", RECORD_CRC_TAIL))
            s.pack_into(buf, pos, n, MAGIC, crc32(body) & 0x7FFFFFFF, q, 0, qoff, phys, sys_flag, born_ms, born_host,
                        now_ms, store_host, 0, 0, lb, body, tl, topic, pl, props)
            end = pos + n
            tcrc = crc32(buf[pos + off_body + lb:end - back])
            buf[end - back:end - 1] = b"%010d" % crc32(buf[pos:pos + off_body], tcrc)
            if index_prefix_crc >= 0:
                for key in (*(ks.split(b" ") if ks else ()), mid):
                    if key:
                        index_items += item_pack(crc32(key, index_prefix_crc) & 0x7FFFFFFF, phys)
            t.rr += 1
            t.next_offsets[q] = qoff + 1
            _done(units, t.queues[q], qoff, unit_pack(phys, n, TH[i]), i, (phys, n, q, qoff),
                  (res_phys, res_size, res_qid, res_qoff))
            pos = end
    except Exception as e:  # noqa: BLE001 - the item that cannot be packed stops the loop: the caller says why
        return k, pos, e
    return len(O), pos, None


append_slices = ACCEL.append_slices if ACCEL is not None else py_append_slices
