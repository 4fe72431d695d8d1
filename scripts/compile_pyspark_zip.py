"""Add compiled code to pyspark's pyspark.zip, so the Python processes Spark starts do not compile pyspark.

    .venv/bin/python scripts/compile_pyspark_zip.py PATH/TO/pyspark/python/lib/pyspark.zip

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the PYTHONPATH of every Python process it
starts (PythonWorkerFactory: the worker daemon, the planner workers, the streaming source runner); with
pip's pyspark, SPARK_HOME is the installed package, whose zip holds sources only. Python's zipimport
writes no bytecode cache, so each such process compiled every pyspark module it imported: the streaming
source runner, which Spark starts as a simple worker and waits a hardcoded 10 s for it to connect back
(PythonWorkerFactory.createSimpleWorker; no setting governs it), took 12-21 s to get there at load 13-15
on two CPUs (5-7 s with this zip compiled): "Python worker failed to connect back".

This rewrites the zip (atomically, beside it) with, next to each ``X.py``, an ``X.pyc`` that zipimport
loads before the source: unchecked hash-based (PEP 552), so it is used as is, and an interpreter of
another version finds a magic number not its own and compiles the source as before. Nothing else in
the zip changes. Run by scripts/bootstrap.sh (ensure_venv) whenever the zip changed.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import sys
import warnings
import zipfile

_UNCHECKED_HASH = (0b01).to_bytes(4, "little")     # PEP 552 flags: hash-based, check_source off


def pyc(source: bytes, name: str) -> bytes | None:
    """The .pyc bytes of ``source`` (zipimport's layout), or None where it does not compile."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            code = compile(source, name, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return None
    return importlib.util.MAGIC_NUMBER + _UNCHECKED_HASH + importlib.util.source_hash(source) + marshal.dumps(code)


def compile_zip(path: str) -> int:
    """Rewrite the zip at ``path`` with a .pyc beside every .py that has none; how many were added."""
    tmp = f"{path}.{os.getpid()}.tmp"
    added = 0
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zout:
        names = set(zin.namelist())
        for info in zin.infolist():
            data = zin.read(info)
            zout.writestr(info, data)
            if not info.filename.endswith(".py") or info.filename + "c" in names:
                continue
            code = pyc(data, info.filename)
            if code is not None:
                out = zipfile.ZipInfo(info.filename + "c", date_time=info.date_time)
                out.compress_type = zipfile.ZIP_DEFLATED
                zout.writestr(out, code)
                added += 1
    os.replace(tmp, path)
    return added


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(f"{p}: {compile_zip(p)} modules compiled", file=sys.stderr)
