"""tidemq.record.crc gives zlib's CRC-32 exactly (ISA-L's when installed): any length, any alignment,
chained, from bytes, memoryview slices, mmaps and numpy buffers."""

import mmap
import random
import zlib

import numpy as np

from tidemq.record import crc


def test_identical_to_zlib_for_any_input_and_chaining():
    rng = random.Random(7)
    data = rng.randbytes(70_000)
    mv = memoryview(data)
    for _ in range(2000):
        a = rng.randrange(len(data))
        b = min(len(data), a + rng.choice((0, 1, 3, 7, 88, 1024, rng.randrange(70_000))))
        start = rng.randrange(1 << 32)
        assert crc.crc32(mv[a:b]) == zlib.crc32(mv[a:b])
        assert crc.crc32(mv[a:b], start) == zlib.crc32(mv[a:b], start)
    m = mmap.mmap(-1, len(data))
    m[:] = data
    assert crc.crc32(m) == zlib.crc32(data)
    m.close()
    assert crc.crc32(np.frombuffer(data, np.uint8)) == zlib.crc32(data)
    assert crc.crc32(b"") == 0


def test_the_fast_implementation_is_the_one_installed():
    assert crc.IMPLEMENTATION == "isal", "isal is a pinned dependency (pyproject.toml)"
