"""Many slices of one buffer copied by Arrow: the same bytes a Python loop of slices gives,
for short values (inlined in the view) and long ones, empty ones, at the buffer's end, tiny
buffers, with nulls."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.bulk import gather, gather_bytes


@st.composite
def buffer_and_slices(draw):
    buf = draw(st.binary(min_size=1, max_size=400))
    n = draw(st.integers(0, 30))
    slices = []
    for _ in range(n):
        start = draw(st.integers(0, len(buf)))
        slices.append((start, draw(st.integers(0, len(buf) - start))))
    return buf, slices


@settings(max_examples=300, deadline=None)
@given(buffer_and_slices(), st.data())
def test_gather_is_the_slices(case, data):
    buf, slices = case
    starts = np.array([s for s, _ in slices], np.int64)
    lens = np.array([n for _, n in slices], np.int64)
    want = [buf[s:s + n] for s, n in slices]
    got = gather(np.frombuffer(buf, np.uint8), pa.py_buffer(buf), starts, lens)
    assert got.to_pylist() == want
    valid = np.array(data.draw(st.lists(st.booleans(), min_size=len(slices), max_size=len(slices))), bool)
    masked = gather(np.frombuffer(buf, np.uint8), pa.py_buffer(buf), starts, lens, valid)
    assert masked.to_pylist() == [w if v else None for w, v in zip(want, valid)]
    assert gather_bytes(buf, starts, lens).to_pybytes() == b"".join(want)


def test_nothing_gathered_is_empty():
    assert gather_bytes(b"abc", np.array([], np.int64), np.array([], np.int64)).to_pybytes() == b""


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
