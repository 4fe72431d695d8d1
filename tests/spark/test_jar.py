"""spark/jar.py: the JVM reader's jar, compiled from the package's Java sources with the machine's
javac into a cache keyed by the sources, Spark's version and javac's: reused while they stay,
rebuilt when a source changes, one clear line and the Python data source when javac is missing
or fails (and a fresh session whose driver has no javac reads with the Python reader)."""

import json
import logging
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from tidemq.spark import jar

from ..support.spark import checkout_jar

pytestmark = pytest.mark.timeout(600)
needs_javac = pytest.mark.skipif(shutil.which("javac") is None, reason="no javac on this machine")


@pytest.fixture
def sources(tmp_path, monkeypatch):
    """A copy of the Java sources that jar.py builds from."""
    d = tmp_path / "jvm"
    shutil.copytree(jar.SOURCES_DIR, d)
    monkeypatch.setattr(jar, "SOURCES_DIR", str(d))
    return d


@pytest.fixture
def javac_runs(monkeypatch):
    """How many times javac compiled something."""
    runs = []
    real = subprocess.run

    def run(cmd, *a, **kw):
        if "-d" in cmd:
            runs.append(cmd)
        return real(cmd, *a, **kw)
    monkeypatch.setattr(jar.subprocess, "run", run)
    return runs


@needs_javac
def test_a_jar_is_built_once_and_rebuilt_when_a_source_changes(sources, javac_runs, tmp_path):
    """One javac run: the cache starts with the jar of these sources (the checkout's, built once for
    the run: tests/support/spark.py), which is reused; a changed source is built, once."""
    import pyspark
    cache = str(tmp_path / "cache")
    os.makedirs(cache)
    seeded = shutil.copy(checkout_jar(), cache)      # the same sources, Spark and javac: the same key
    javac_runs.clear()
    first = jar.build(cache)
    assert first == seeded and javac_runs == []                         # cached: javac not run
    assert os.path.basename(first).startswith(f"tidemq-spark-{pyspark.__version__}-")
    with open(sources / "Records.java", "a") as f:
        f.write("\n// changed\n")
    second = jar.build(cache)
    assert second != first and len(javac_runs) == 1 and os.path.exists(first)
    assert jar.build(cache) == second and len(javac_runs) == 1          # built once: javac not run again
    with zipfile.ZipFile(second) as z:
        assert z.read(jar.SERVICE).decode().strip() == jar.PROVIDER
        assert "org/tidemq/spark/TidemqProvider.class" in z.namelist()
    assert os.path.basename(second).startswith(f"tidemq-spark-{pyspark.__version__}-")
    assert [n for n in os.listdir(cache) if not n.endswith(".jar")] == []   # no temporary left behind


def test_without_javac_the_python_reader_is_used_with_one_line(monkeypatch, tmp_path, caplog):
    monkeypatch.setattr(jar.shutil, "which", lambda name: None)
    with caplog.at_level(logging.WARNING, logger="tidemq.spark"):
        assert jar.jar_path(str(tmp_path)) is None
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "no javac on PATH" in lines[0] and "Python data source" in lines[0]
    with pytest.raises(jar.JarError, match="no javac on PATH"):
        jar.build(str(tmp_path))
    assert os.listdir(tmp_path) == []


@needs_javac
def test_a_javac_failure_is_one_clear_error(sources, tmp_path, caplog):
    with open(sources / "Records.java", "a") as f:
        f.write("\nthis is not java\n")
    with pytest.raises(jar.JarError, match="javac failed .*Records.java"):
        jar.build(str(tmp_path / "cache"))
    assert jar.jar_path(str(tmp_path / "cache")) is None
    assert not any(n.endswith(".jar") for n in os.listdir(tmp_path / "cache"))


SESSION_WITHOUT_JAVAC = """
import json, sys
import tidemq.spark.jar as jar
jar.shutil.which = lambda name: None                     # this driver has no javac
from tidemq.spark import _provider_class, session
from tidemq.store import Message, MessageStore, StoreConfig
root = sys.argv[1]
s = MessageStore(StoreConfig(root_dir=root, segment_size_bytes=64 * 1024, index_enabled=False)).start()
s.create_topic("T", 2)
s.put_batch([Message("T", b"m%d" % i) for i in range(20)])
s.shutdown()
spark = session("local[1]", "no-javac")
n = spark.read.format("tidemq").option("path", root).option("topic", "T").load().count()
print(json.dumps({"provider": _provider_class(spark), "rows": n, "jars": spark.conf.get("spark.jars", "")}))
spark.stop()
"""


def test_a_session_whose_driver_has_no_javac_reads_with_the_python_reader(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-c", SESSION_WITHOUT_JAVAC, str(tmp_path / "store")], capture_output=True,
                       text=True, timeout=600, env=env, cwd=str(tmp_path))
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    assert lines, r.stderr[-3000:]
    assert json.loads(lines[-1]) == {"provider": "org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2",
                                     "rows": 20, "jars": ""}
    assert "the JVM reader is not available (no javac on PATH" in r.stderr
