"""Commit-log records to Arrow, in bulk: numpy finds the fields, Arrow's C++ copies the bytes.

The records of a batch sit in one buffer (a mapped segment, or the bytes of a raw pull)
at known positions. Fixed-offset header fields are gathered with numpy for all records
at once. Variable-length fields (body, topic, properties) are cut without a Python loop
(tidemq.bulk.gather: Arrow copies them in C). Properties are split into a map with Arrow compute kernels; tags, keys
and the message id come out of that map. No per-record Python object is made.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.lib.stride_tricks import sliding_window_view

from ..bulk import gather
from ..record import codec
from ..record.integrity import damaged_records

SCHEMA = pa.schema([
    ("topic", pa.string()),
    ("queue_id", pa.int32()),
    ("queue_offset", pa.int64()),
    ("commitlog_offset", pa.int64()),
    ("msg_id", pa.string()),
    ("tags", pa.string()),
    ("keys", pa.list_(pa.string())),
    ("body", pa.binary()),
    ("properties", pa.map_(pa.string(), pa.string())),
    ("born_timestamp", pa.timestamp("us", tz="UTC")),
    ("store_timestamp", pa.timestamp("us", tz="UTC")),
])

SPARK_SCHEMA = ("topic string, queue_id int, queue_offset long, commitlog_offset long, msg_id string, "
                "tags string, keys array<string>, body binary, properties map<string,string>, "
                "born_timestamp timestamp, store_timestamp timestamp")

_HIDDEN = codec.RECORD_CRC_TAIL_LEN          # the record-CRC property every record ends with
_HEAD = np.dtype([("size", ">i4"), ("magic", ">i4"), ("body_crc", ">i4"), ("queue_id", ">i4"), ("flag", ">i4"),
                  ("queue_offset", ">i8"), ("commitlog_offset", ">i8"), ("sysflag", ">i4"), ("born_ms", ">i8"),
                  ("born_host", "V8"), ("store_ms", ">i8"), ("store_host", "V8"), ("reconsume_times", ">i4"),
                  ("prepared_offset", ">i8"), ("body_len", ">i4")])     # the 88 fixed bytes (record/codec.py)
assert _HEAD.itemsize == codec.OFF_BODY and _HEAD.fields["body_len"][1] == codec.OFF_BODYLEN
assert _HEAD.fields["store_ms"][1] == codec.OFF_STORETIMESTAMP
_HEX = np.frombuffer(b"".join(b"%02X" % i for i in range(256)), np.uint8).reshape(256, 2)
_PICKED = (codec.PROP_TAGS, codec.PROP_KEYS, codec.PROP_UNIQ_KEY)


@functools.cache
def _arrow_constants() -> tuple[pa.Array, pa.Scalar]:
    """The _PICKED names as an Arrow array and an empty keys list, made at the first decode: pyarrow's
    conversion of Python objects imports pandas (~1 s), which a planning process never needs (Spark's
    planner workers import tidemq.spark.source, which imports this module)."""
    return pa.array(_PICKED, pa.string()), pa.scalar([], pa.list_(pa.string()))


def _fixed(buf: np.ndarray, arrow_buf: pa.Buffer, starts: np.ndarray, width: int) -> np.ndarray:
    """buf[starts[i] : starts[i] + width] for every i, as an (n, width) array (copied by Arrow)."""
    got = gather(buf, arrow_buf, starts, np.full(len(starts), width, np.int64))
    data = np.frombuffer(got.buffers()[2], np.uint8)
    first = int(np.frombuffer(got.buffers()[1], np.int32)[got.offset])
    return data[first:first + len(starts) * width].reshape(len(starts), width)


def _as_string(arr: pa.Array) -> pa.Array:
    """binary -> string without a copy, invalid UTF-8 replaced (properties are written as UTF-8)."""
    try:
        return arr.cast(pa.string())
    except pa.ArrowInvalid:
        return pa.array([None if b is None else b.decode("utf-8", "replace") for b in arr.to_pylist()], pa.string())


def _keys(text: pa.Array, n: int) -> pa.Array:
    """KEYS split on spaces, empty pieces dropped, [] where there is none (as the codec reads them)."""
    parts = pc.fill_null(pc.split_pattern(text, codec.KEY_SEP), _arrow_constants()[1])
    flat = pc.list_flatten(parts)
    keep = pc.not_equal(flat, "")
    if pc.all(keep).as_py() is not False:
        return parts
    parents = pc.list_parent_indices(parts).to_numpy()[keep.to_numpy(zero_copy_only=False)]
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.bincount(parents, minlength=n), out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), flat.filter(keep))


def _properties(text: pa.Array, n: int) -> tuple[pa.MapArray, dict[str, pa.Array]]:
    """The properties map of every record, and the values of the _PICKED names as columns
    (null where a record has none). ``text`` is null where a record has no properties.
    Both separators are made one and split once: names and values alternate."""
    parts = pc.split_pattern(pc.replace_substring(text, codec.NAME_VALUE_SEP, codec.PROPERTY_SEP),
                             codec.PROPERTY_SEP)
    offsets = parts.offsets.to_numpy()
    if parts.offset or (offsets & 1).any():
        return _properties_slow(text, n)
    flat = parts.values
    names = flat.take(pa.array(np.arange(0, len(flat), 2)))
    values = flat.take(pa.array(np.arange(1, len(flat), 2)))
    pair_offsets = (offsets >> 1).astype(np.int32)
    parents = np.repeat(np.arange(n), np.diff(pair_offsets))
    return pa.MapArray.from_arrays(pa.array(pair_offsets), names, values), _pick(names, values, parents, n)


def _properties_slow(text: pa.Array, n: int) -> tuple[pa.MapArray, dict[str, pa.Array]]:
    """Properties that are not all name/value pairs (written by something else): item by item."""
    items = pc.split_pattern(pc.fill_null(text, ""), codec.PROPERTY_SEP)
    parents = pc.list_parent_indices(items).to_numpy()
    kv = pc.split_pattern(pc.list_flatten(items), codec.NAME_VALUE_SEP, max_splits=1)
    ok = pc.equal(pc.list_value_length(kv), 2)
    kv = kv.filter(ok)
    parents = parents[ok.to_numpy(zero_copy_only=False)]
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.bincount(parents, minlength=n), out=offsets[1:])
    names, values = pc.list_element(kv, 0), pc.list_element(kv, 1)
    return pa.MapArray.from_arrays(pa.array(offsets), names, values), _pick(names, values, parents, n)


def _pick(names: pa.Array, values: pa.Array, parents: np.ndarray, n: int) -> dict[str, pa.Array]:
    """Per record, the value of each _PICKED name (null where it has none); ``parents``: the
    record of every name/value pair."""
    picked = {}
    which = pc.fill_null(pc.index_in(names, value_set=_arrow_constants()[0]), -1).to_numpy()   # one pass over names
    for k, name in enumerate(_PICKED):
        at = np.flatnonzero(which == k)
        idx = np.full(n, -1, np.int64)
        idx[parents[at]] = at
        picked[name] = values.take(pa.array(idx, mask=idx < 0))
    return picked


def _msg_ids(uniq: pa.Array, h: np.ndarray) -> pa.Array:
    """The UNIQ_KEY property, or where there is none (or it is empty) the offset message id:
    store host and commit-log offset in upper-case hex (as RocketMQ's)."""
    missing = pc.or_kleene(pc.is_null(uniq), pc.equal(uniq, ""))
    if not pc.any(missing).as_py():
        return uniq
    n = len(h)
    ids = np.concatenate([np.ascontiguousarray(h["store_host"]).view(np.uint8).reshape(n, 8),
                          h["commitlog_offset"].astype(">i8").view(np.uint8).reshape(n, 8)], axis=1)
    offset_ids = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * 32),
                                                        pa.py_buffer(np.ascontiguousarray(_HEX[ids]))])
    return pc.if_else(missing, offset_ids, uniq)


def decode(buf, positions: np.ndarray, sizes: np.ndarray, crc_checked: bool = False,
           expect: tuple | None = None) -> tuple[pa.RecordBatch, int]:
    """The records at ``positions`` (their stored ``sizes``) of ``buf`` (bytes, mmap, numpy
    uint8) as a RecordBatch of SCHEMA, and how many were skipped as not well-formed or failing
    their body or record CRC (damage kept by recovery is skipped, as the store's own reads do;
    the source counts them as offsets not in the store: failOnDataLoss). ``crc_checked``: the
    records' CRCs were checked on their way here (a broker's raw pull under a frame CRC that
    held, the archive's walk of a segment): only their layout is checked again. ``expect``: (topic,
    queue id, each record's queue offset) the records must be (read through consume-queue units, which
    have no CRC of their own: a damaged unit can point at an intact record of another queue); one
    that is not is skipped as damaged (checked in damaged_records' pass over each record, with its
    CRCs: given ``expect``, those are checked whatever ``crc_checked`` says)."""
    if not isinstance(buf, np.ndarray):
        buf = np.frombuffer(buf, np.uint8)
    positions = np.asarray(positions, np.int64)
    sizes = np.asarray(sizes, np.int64)
    n_in = len(positions)
    if n_in == 0:
        return pa.RecordBatch.from_pylist([], schema=SCHEMA), 0
    end = len(buf)
    ok = (positions >= 0) & (sizes >= codec.FIXED_OVERHEAD + _HIDDEN) & (positions + sizes <= end)
    if not ok.all():
        positions, sizes = positions[ok], sizes[ok]
    abuf = pa.py_buffer(buf)
    h = _fixed(buf, abuf, positions, codec.OFF_BODY).reshape(-1).view(_HEAD)    # every record's 88 fixed bytes
    blen = h["body_len"].astype(np.int64)
    good = (h["size"] == sizes) & (h["magic"] == codec.MAGIC) & (blen >= 0) & \
        (codec.FIXED_OVERHEAD + blen + _HIDDEN <= sizes)
    tpos = positions + codec.OFF_BODY + np.where(good, blen, 0)
    tlen = buf[tpos].astype(np.int64)
    ppos = tpos + 1 + tlen
    good &= ppos + 2 <= positions + sizes
    pp = np.where(good, ppos, positions)
    plen = (buf[pp].astype(np.int64) << 8) | buf[pp + 1]
    good &= (codec.FIXED_OVERHEAD + blen + tlen + plen == sizes) & (plen >= _HIDDEN)
    if not crc_checked or expect is not None:
        idx = np.flatnonzero(good)           # well-formed: their body and record CRCs must hold too
        mine = None
        if expect is not None:               # and each must be the record its unit stands for
            topic, qid, qoffs = expect
            qoffs = np.asarray(qoffs, np.int64)
            mine = (topic.encode(), qid, (qoffs[ok] if not ok.all() else qoffs)[idx])
        damaged = damaged_records(buf, positions[idx], sizes[idx], mine)
        if damaged:
            good[idx[damaged]] = False
    skipped = n_in - int(good.sum())
    if not good.all():
        keep = np.flatnonzero(good)
        positions, sizes, h, blen, tpos, tlen, ppos, plen = (
            a[keep] for a in (positions, sizes, h, blen, tpos, tlen, ppos, plen))
    n = len(positions)
    body = gather(buf, abuf, positions + codec.OFF_BODY, blen)
    names = None
    if n and tlen[0] and (tlen == tlen[0]).all():              # each record's topic as a row of a window
        names = sliding_window_view(buf, int(tlen[0]))[tpos + 1]
    if names is not None and (names == names[0]).all():      # one topic (a queue's records): repeated
        topic = pa.repeat(pa.scalar(names[0].tobytes().decode("ascii", "replace")), n)
    else:
        topic = _as_string(gather(buf, abuf, tpos + 1, tlen))
    ulen = np.maximum(plen - _HIDDEN - 1, 0)                  # user properties without their last separator
    props, picked = _properties(_as_string(gather(buf, abuf, ppos + 2, ulen, valid=ulen > 0)), n)
    keys = _keys(picked[codec.PROP_KEYS], n)
    ms = lambda f: pa.array(h[f].astype(np.int64) * 1000, pa.timestamp("us", tz="UTC"))   # noqa: E731
    batch = pa.RecordBatch.from_arrays([
        topic,
        pa.array(h["queue_id"].astype(np.int32)),
        pa.array(h["queue_offset"].astype(np.int64)),
        pa.array(h["commitlog_offset"].astype(np.int64)),
        _msg_ids(picked[codec.PROP_UNIQ_KEY], h),
        picked[codec.PROP_TAGS],
        keys,
        body,
        props,
        ms("born_ms"),
        ms("store_ms"),
    ], schema=SCHEMA)
    return batch, skipped


def positions_of(sizes: np.ndarray) -> np.ndarray:
    """Positions of records stored back to back with these sizes."""
    sizes = np.asarray(sizes, np.int64)
    pos = np.zeros(len(sizes), np.int64)
    if len(sizes) > 1:
        np.cumsum(sizes[:-1], out=pos[1:])
    return pos
