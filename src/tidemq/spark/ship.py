"""Sending the tidemq package to a Spark application's executors (tidemq.spark.register).

The package this driver imports is zipped (its .py files and the stubs' data, no caches)
into a file named after its content, and added to the application: SparkContext.addPyFile
on a classic session, the session's Python artifacts through Spark Connect. Spark puts it
on every Python worker's path (driver-side planning workers and executors alike). The
driver keeps importing the installed package (addPyFile would put the zip on its path too).
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import tempfile
import zipfile

_SKIP_DIRS = {"__pycache__"}
_SKIP_EXT = (".pyc", ".pyo")


def package_zip(out_dir: str | None = None) -> str:
    """The zip of the installed tidemq package (made once per content; its path)."""
    import tidemq
    top = os.path.dirname(os.path.abspath(tidemq.__file__))
    base = os.path.dirname(top)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for d, dirs, files in os.walk(top):
            dirs[:] = sorted(x for x in dirs if x not in _SKIP_DIRS)
            for name in sorted(files):
                if name.endswith(_SKIP_EXT):
                    continue
                path = os.path.join(d, name)
                info = zipfile.ZipInfo(os.path.relpath(path, base), date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                with open(path, "rb") as f:
                    z.writestr(info, f.read())
    data = buf.getvalue()
    out_dir = out_dir or os.path.join(tempfile.gettempdir(), "tidemq-ship")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"tidemq-{tidemq.__version__}-{hashlib.sha1(data).hexdigest()[:12]}.zip")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    return path


def is_connect(spark) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def ship_package(spark) -> str:
    """Add the package's zip to this session's application (once per zip); its path."""
    path = package_zip()
    if is_connect(spark):
        shipped = getattr(spark, "_tidemq_shipped", set())
        if path not in shipped:
            spark.addArtifacts(path, pyfile=True)          # an artifact cannot be added twice
            spark._tidemq_shipped = shipped | {path}
        return path
    sc = spark.sparkContext
    name = os.path.basename(path)
    if name in (sc._python_includes or []):
        return path
    before = list(sys.path)
    sc.addPyFile(path)
    sys.path[:] = [p for p in sys.path if p in before or not p.endswith(name)]
    return path
