"""tidemq.bulk: many slices of one buffer, against Python's slicing (short values, which a
binary_view holds inline, long ones, empty ones, slices at the buffer's very end, tiny buffers)."""

import numpy as np
import pyarrow as pa
import pytest

from tidemq.bulk import gather, gather_bytes


@pytest.mark.parametrize("size", [0, 1, 5, 11, 12, 13, 40, 1000])
def test_gather_matches_slicing(size):
    rng = np.random.default_rng(size)
    raw = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
    buf = np.frombuffer(raw, np.uint8)
    starts, lens = [], []
    for _ in range(300):
        s = int(rng.integers(0, size + 1))
        n = int(rng.integers(0, min(size - s, 40) + 1))
        starts.append(s)
        lens.append(n)
    starts += [max(0, size - k) for k in range(min(size, 13) + 1)]         # every slice that ends at the end
    lens += [min(size, k) for k in range(min(size, 13) + 1)]
    starts, lens = np.array(starts, np.int64), np.array(lens, np.int64)
    got = gather(buf, pa.py_buffer(buf), starts, lens).to_pylist()
    assert got == [raw[s:s + n] for s, n in zip(starts.tolist(), lens.tolist())]
    assert bytes(gather_bytes(raw, starts, lens)) == b"".join(raw[s:s + n] for s, n in zip(starts.tolist(),
                                                                                         lens.tolist()))


def test_validity_makes_nulls():
    buf = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", np.uint8)
    got = gather(buf, pa.py_buffer(buf), np.array([0, 3, 20]), np.array([2, 0, 6]), valid=np.array([True, False, True]))
    assert got.to_pylist() == [b"ab", None, b"uvwxyz"]
