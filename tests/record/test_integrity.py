"""Read-side integrity (issue 12): the batch check of records as stored, StoredMessage.intact,
and the rate-limited count of damaged records."""

from __future__ import annotations

import mmap

import numpy as np

from tidemq.record import codec
from tidemq.record.integrity import DamageCounter, damaged_records


def _record(i: int = 7, body: bytes = b"hello world" * 5) -> bytes:
    return codec.encode_record(body=body, topic=b"Topic", properties=b"KEYS\x01k1\x02", queue_id=1,
                               queue_offset=i, physical_offset=64, born_timestamp_ms=1, born_host=bytes(8),
                               store_timestamp_ms=2, store_host=bytes(8))


def test_a_flip_of_any_byte_fails_both_read_path_checks_and_recoverys():
    """damaged_records (get_raw, Spark) and StoredMessage.intact (get) catch a flipped byte
    anywhere in the header, body, topic, properties, CRC digits or the separator after them; so do
    check_record and scan_run (recovery, verify)."""
    rec = _record()
    buf = bytes(64) + rec + bytes(17)
    assert damaged_records(buf, [64], [len(rec)]) == []
    assert codec.decode_record(buf, 64, len(rec)).intact()
    for i in range(len(rec)):
        b = bytearray(buf)
        b[64 + i] ^= 0x10
        assert damaged_records(bytes(b), [0, 64], [64, len(rec)]) == [0, 1], i
        assert codec.check_record(bytes(b), 64, len(b))[0] != codec.REC_OK, i
        assert codec.scan_run(bytes(b), 64, len(b))[1] == 0, i
        try:
            m = codec.decode_record(bytes(b), 64, len(rec))
        except codec.CodecError:
            continue
        assert not m.intact(), i


def test_a_units_size_that_disagrees_with_the_record_fails():
    rec = _record()
    buf = bytes(64) + rec + bytes(17)
    assert damaged_records(buf, [64, 64, 64], [len(rec) + 1, len(rec) - 1, len(rec)]) == [0, 1]


def test_batches_from_an_mmap_a_numpy_array_and_bytes_agree():
    recs = [_record(i, b"b%d" % i * (i % 40)) for i in range(100)]
    data = bytearray(b"".join(recs))
    sizes = np.array([len(r) for r in recs], np.int64)
    starts = np.concatenate(([0], np.cumsum(sizes[:-1])))
    for k in (5, 6, 50, 99):
        data[int(starts[k]) + 30] ^= 0x01
    m = mmap.mmap(-1, len(data))
    m[:] = bytes(data)
    try:
        for buf in (bytes(data), np.frombuffer(bytes(data), np.uint8), m):
            assert damaged_records(buf, starts, sizes) == [5, 6, 50, 99]
        assert damaged_records(m, starts[:0], sizes[:0]) == []
    finally:
        m.close()                                   # no view of it is left behind


def test_damaged_record_log_lines_are_rate_limited(caplog):
    d = DamageCounter(interval_s=3600)
    with caplog.at_level("WARNING", logger="tidemq.store"):
        for i in range(50):
            d.note("T", 0, i, 1000 + i)
    assert d.total == 50
    assert len([r for r in caplog.records if r.name == "tidemq.store"]) == 1


def test_the_batch_check_agrees_with_the_per_record_check_on_random_damage():
    """damaged_records (numpy gathers, CRCs in one loop, compared in numpy) says what
    codec.check_record says, record by record, over batches with random bytes overwritten,
    zero-filled and random records, and lengths that lie."""
    import random
    rng = random.Random(5)
    recs = [_record(i, b"b%d" % i * (i % 7 * 20)) for i in range(40)]
    for trial in range(60):
        data = bytearray(b"".join(recs))
        starts, sizes, pos = [], [], 0
        for r in recs:
            starts.append(pos)
            sizes.append(len(r))
            pos += len(r)
        for _ in range(rng.randint(0, 6)):
            k = rng.randrange(len(recs))
            how = rng.random()
            if how < 0.5:
                at = starts[k] + rng.randrange(sizes[k])
                data[at] ^= 1 << rng.randrange(8)
            elif how < 0.7:
                data[starts[k]:starts[k] + sizes[k]] = bytes(sizes[k])
            elif how < 0.9:
                data[starts[k]:starts[k] + sizes[k]] = rng.randbytes(sizes[k])
            else:
                sizes[k] = max(0, sizes[k] + rng.choice((-1, 1)))
        buf = bytes(data) + bytes(64)                  # records lie within the buffer (as in a segment)
        want = [i for i, (p, n) in enumerate(zip(starts, sizes))
                if codec.check_record(buf, p, p + n)[0] != codec.REC_OK or codec.check_record(buf, p, p + n)[1] != n]
        assert damaged_records(buf, starts, sizes) == want, trial
