"""The optional compiled part of tidemq: tidemq._accel (src/tidemq/accel_c/), built from source by
`pip install` with the machine's C compiler. Optional: when it cannot be built, the install goes
on and tidemq runs its pure-Python record loops (tidemq/accel.py selects)."""

from setuptools import Extension, setup

PARTS = ["module", "crc", "write", "put_one", "validate", "frame", "send_one", "dedup", "read", "replica",
         "dispatch"]          # src/tidemq/accel_c/<part>.c, accel.h
setup(ext_modules=[Extension("tidemq._accel", [f"src/tidemq/accel_c/{p}.c" for p in PARTS], optional=True,
                             depends=["src/tidemq/accel_c/accel.h"],
                             extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-missing-braces"])])
