"""The optional compiled part of tidemq: tidemq._accel (src/tidemq/_accel.c), built from source by
`pip install` with the machine's C compiler. Optional: when it cannot be built, the install goes
on and tidemq runs its pure-Python record loops (tidemq/accel.py selects)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("tidemq._accel", ["src/tidemq/_accel.c"], optional=True,
                             extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-missing-braces"])])
