"""Copying many slices of one buffer without a Python loop.

A ``binary_view`` array whose views point into the buffer is built with numpy, and
Arrow's cast to ``binary`` does the copying in C: ~0.1 us a slice here, where a
Python loop of slices and a join costs ~0.5 us. Used by the store's raw reads
(records of one queue, scattered in the commit log) and the Spark decoder.

pyarrow is imported on the first call, not with this module: a broker imports it (through
record/framing.py) but only its raw pulls use it, and importing pyarrow costs ~0.1-0.2 s of
every start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

if TYPE_CHECKING:
    import pyarrow as pa

_INLINE = 12                               # a binary_view holds values up to 12 bytes itself
_ARANGE = np.arange(_INLINE)


def gather(buf: np.ndarray, arrow_buf: pa.Buffer, starts: np.ndarray, lens: np.ndarray,
           valid: np.ndarray | None = None) -> pa.Array:
    """binary array of buf[starts[i] : starts[i] + lens[i]]: views built in numpy, copied by Arrow.
    (A long value's view also has a 4-byte prefix; the cast to binary does not read it, so it
    is left zero.)"""
    import pyarrow as pa
    import pyarrow.compute as pc
    n = len(starts)
    views = np.zeros((n, 4), np.int32)
    views[:, 0] = lens
    views[:, 3] = starts
    vb = views.view(np.uint8)
    short = np.flatnonzero(lens <= 12)
    if len(short):                         # short values live inside the view itself
        vb[short, 4:16] = _inline(buf, starts[short], lens[short])
    bitmap = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    arr = pa.Array.from_buffers(pa.binary_view(), n, [bitmap, pa.py_buffer(views), arrow_buf])
    return pc.cast(arr, pa.binary())


def _inline(buf: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The 12 bytes from each start, those past its length zeroed: rows of a sliding window
    over buf (one index per value, not one per byte); values in the last 12 bytes one by one."""
    if len(buf) < _INLINE:
        near = np.ones(len(starts), bool)
        out = np.zeros((len(starts), _INLINE), np.uint8)
    else:
        near = starts > len(buf) - _INLINE
        out = sliding_window_view(buf, _INLINE)[np.where(near, 0, starts)]
    for k in np.flatnonzero(near):
        s, n = int(starts[k]), int(lens[k])
        out[k] = 0
        out[k, :n] = buf[s:s + n]
    return out * (_ARANGE < lens[:, None])


def gather_bytes(buf, starts: np.ndarray, lens: np.ndarray) -> pa.Buffer:
    """buf[starts[0]:+lens[0]] + buf[starts[1]:+lens[1]] + ... in one new buffer (a pa.Buffer:
    it has the buffer protocol, so a join or a write takes it without another copy)."""
    import pyarrow as pa
    if len(starts) == 0:
        return pa.py_buffer(b"")
    arr = np.frombuffer(buf, np.uint8)
    got = gather(arr, pa.py_buffer(buf), np.asarray(starts, np.int64), np.asarray(lens, np.int64))
    offsets = np.frombuffer(got.buffers()[1], np.int32)
    lo, hi = int(offsets[got.offset]), int(offsets[got.offset + len(got)])
    return got.buffers()[2].slice(lo, hi - lo)
