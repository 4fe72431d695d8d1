"""Which per-record loops run: the compiled ones (``tidemq._accel``, src/tidemq/accel_c/) or
their pure-Python twins.

The compiled module is built from source by the project's own ``pip install`` (setup.py; it is
optional: without a C compiler the install goes on without it). It is used when it is built, is
the version this code expects, and ``TIDEMQ_ACCEL`` is not ``0`` (config.accel_wanted); else the
Python twins run. Both give the same bytes and outcomes (tests/test_accel.py), and CI runs the
suite both ways (.ci/run).

``ACCEL`` is the module or None. The CRC inside the compiled loops is ISA-L's (the ``isal``
package tidemq.record.crc uses, by the address of its exported ``crc32_gzip_refl``) when that is
loadable and agrees with the tables, else its own slice-by-8 tables: the same values either way.
"""

from __future__ import annotations

import logging

from .config import accel_wanted

log = logging.getLogger("tidemq")

VERSION = 15          # accel_c/accel.h's ACCEL_VERSION this code is written against
ACCEL = None
CRC = "none"          # the compiled loops' CRC: "isal", "tables" (or "none": no compiled loops)


def _isal_address() -> int:
    """The address of ISA-L's crc32_gzip_refl in the isal package's loaded module, or 0."""
    try:
        import ctypes

        from isal import isal_zlib
        return ctypes.cast(ctypes.CDLL(isal_zlib.__file__).crc32_gzip_refl, ctypes.c_void_p).value or 0
    except (ImportError, OSError, AttributeError):
        return 0


if accel_wanted():
    try:
        from . import _accel
    except ImportError:
        _accel = None
    if _accel is not None and getattr(_accel, "VERSION", None) != VERSION:
        log.warning("tidemq._accel is version %s, this code wants %d: rebuild it (pip install -e .); "
                    "running the pure-Python loops", getattr(_accel, "VERSION", None), VERSION)
        _accel = None
    if _accel is not None:
        ACCEL = _accel
        try:
            CRC = "isal" if _accel.use_crc(_isal_address()) else "tables"
        except ValueError:          # not the address of ISA-L's exported function: never called
            CRC = "tables"


def describe() -> str:
    """For people (`tidemq --version`-like outputs, bench reports)."""
    return f"compiled (tidemq._accel, CRC: {CRC})" if ACCEL is not None else "pure Python"
