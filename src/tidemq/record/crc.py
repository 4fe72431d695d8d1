"""CRC-32 as zlib computes it (IEEE 802.3, the polynomial RocketMQ's UtilAll.crc32 uses), from
ISA-L (the ``isal`` package: carry-less multiplication, ~5x zlib's speed on a 1 KiB body here)
when it is installed, else from zlib. Both give identical values and take the same arguments
(``crc32(data, value=0)``, chaining included): tests/test_crc.py holds them to it.

Every CRC the store computes or checks per record goes through this ``crc32``: the body and
record CRCs at append (writer.py, commit_log.py), on every read (codec.py, integrity.py), in the
archive (spark/archive.py), and the index's key hash (index_file.py)."""

from __future__ import annotations

try:
    from isal.isal_zlib import crc32
    IMPLEMENTATION = "isal"
except ImportError:                # not installed (a client that only decodes, a minimal environment)
    from zlib import crc32
    IMPLEMENTATION = "zlib"

__all__ = ["crc32", "IMPLEMENTATION"]
