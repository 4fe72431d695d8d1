"""tidemq's JVM reader, compiled on first use: src/tidemq/spark/jvm/*.java -> a cached jar.

The Java sources ship inside the package (package data). ``jar_path()`` compiles them with
the machine's ``javac`` against the jars of the installed pyspark (nothing is downloaded:
no build tool, no repository) into ``<cache>/tidemq-spark-<spark version>-<hash>.jar``,
where the hash covers the sources, the Spark version and the javac's version, so a change of
any of them builds a new jar and an unchanged one is reused. The jar is written to a
temporary file and renamed into place (atomic: readers never see half a jar; two builds at
once both produce the same bytes). It holds the classes and
``META-INF/services/org.apache.spark.sql.sources.DataSourceRegister`` naming
org.tidemq.spark.TidemqProvider (the short name ``tidemq``).

Where ``javac`` is missing or fails, ``jar_path()`` returns None and logs one line saying
why; tidemq.spark.register then uses the Python data source. The cache directory:
``$XDG_CACHE_HOME/tidemq`` (default ``~/.cache/tidemq``), or the ``cache_dir`` given.
"""

from __future__ import annotations

import glob
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

log = logging.getLogger("tidemq.spark")

SOURCES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jvm")
PROVIDER = "org.tidemq.spark.TidemqProvider"
SERVICE = "META-INF/services/org.apache.spark.sql.sources.DataSourceRegister"
JAVA_RELEASE = "17"
JAVAC_TIMEOUT_S = 300.0


class JarError(RuntimeError):
    """The JVM reader could not be built (no javac, or javac failed): the message says why."""


def sources() -> list[str]:
    return sorted(glob.glob(os.path.join(SOURCES_DIR, "*.java")))


def spark_jars() -> tuple[str, str]:
    """(pyspark's version, the directory of its jars)."""
    import pyspark
    return pyspark.__version__, os.path.join(os.path.dirname(pyspark.__file__), "jars")


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tidemq")


def _javac(javac: str | None) -> tuple[str, str]:
    """(javac's path, its version line); JarError when there is none."""
    path = javac or shutil.which("javac")
    if not path:
        raise JarError("no javac on PATH (a JDK 17 or newer is needed on the driver to build the JVM reader)")
    try:
        got = subprocess.run([path, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise JarError(f"{path} -version failed: {e}") from None
    return path, (got.stdout + got.stderr).strip()


def build(cache_dir: str | None = None, javac: str | None = None) -> str:
    """The jar's path, built now unless the cache has it; JarError when it cannot be built."""
    version, jars = spark_jars()
    path, javac_version = _javac(javac)
    srcs = sources()
    if not srcs:
        raise JarError(f"no Java sources in {SOURCES_DIR} (an install without tidemq's package data?)")
    h = hashlib.sha256()
    for s in srcs:
        with open(s, "rb") as f:
            h.update(os.path.basename(s).encode() + b"\0" + f.read() + b"\0")
    h.update(version.encode() + b"\0" + javac_version.encode())
    cache_dir = cache_dir or default_cache_dir()
    out = os.path.join(cache_dir, f"tidemq-spark-{version}-{h.hexdigest()[:16]}.jar")
    if os.path.exists(out):
        return out
    os.makedirs(cache_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tidemq-javac-", dir=cache_dir) as tmp:
        classes = os.path.join(tmp, "classes")
        cmd = [path, "--release", JAVA_RELEASE, "-nowarn", "-encoding", "UTF-8", "-d", classes,
               "-cp", os.path.join(jars, "*"), *srcs]
        try:
            got = subprocess.run(cmd, capture_output=True, text=True, timeout=JAVAC_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise JarError(f"javac failed: {e}") from None
        if got.returncode != 0:
            raise JarError(f"javac failed ({got.returncode}): {(got.stderr or got.stdout).strip()[:2000]}")
        tmp_jar = os.path.join(tmp, "out.jar")
        with zipfile.ZipFile(tmp_jar, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: tidemq\n\n")
            z.writestr(SERVICE, PROVIDER + "\n")
            for d, _dirs, files in sorted(os.walk(classes)):
                for name in sorted(files):
                    full = os.path.join(d, name)
                    z.write(full, os.path.relpath(full, classes))
        os.replace(tmp_jar, out)
    log.info("tidemq: built the JVM reader %s", out)
    return out


def jar_path(cache_dir: str | None = None, javac: str | None = None) -> str | None:
    """build(), or None with one log line saying why the Python data source is used instead."""
    try:
        return build(cache_dir, javac)
    except JarError as e:
        log.warning("tidemq: the JVM reader is not available (%s): reads use the Python data source", e)
        return None


def main() -> int:
    """``python -m tidemq.spark.jar``: build (or find) the jar and print its path, e.g. for
    ``start-connect-server.sh --jars`` or ``spark-submit --jars``; exit 1 saying why it cannot."""
    try:
        print(build())
    except JarError as e:
        print(f"tidemq: the JVM reader cannot be built: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
