"""spark/ship.py: the tidemq package zipped by content (the same bytes: the same file, made once;
its .py files and the stubs' data, no caches) and added once to a classic session's application,
the driver's own path left as it was."""

import os
import sys
import zipfile

import tidemq
from tidemq.spark.ship import is_connect, package_zip, ship_package

TOP = os.path.dirname(os.path.abspath(tidemq.__file__))


def test_the_zip_holds_the_package_sources_and_no_caches(tmp_path):
    path = package_zip(str(tmp_path))
    assert os.path.dirname(path) == str(tmp_path)
    assert os.path.basename(path).startswith(f"tidemq-{tidemq.__version__}-") and path.endswith(".zip")
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        assert z.testzip() is None
        with open(os.path.join(TOP, "spark", "plan.py"), "rb") as f:
            assert z.read("tidemq/spark/plan.py") == f.read()
    assert {"tidemq/__init__.py", "tidemq/spark/ship.py", "tidemq/record/codec.py", "tidemq/cli/main.py"} <= names
    assert not any("__pycache__" in n or n.endswith((".pyc", ".pyo")) for n in names)
    sources = {os.path.relpath(os.path.join(d, n), os.path.dirname(TOP))
               for d, _, files in os.walk(TOP) if "__pycache__" not in d for n in files if n.endswith(".py")}
    assert sources <= names


def test_the_same_content_is_the_same_file_made_once(tmp_path):
    first = package_zip(str(tmp_path))
    made = os.stat(first).st_mtime_ns
    assert package_zip(str(tmp_path)) == first and os.stat(first).st_mtime_ns == made
    assert [n for n in os.listdir(tmp_path)] == [os.path.basename(first)], "no temporary file left"


def test_a_classic_session_gets_the_zip_once_and_the_driver_path_stays(spark, tmp_path):
    assert not is_connect(spark)
    path_before = list(sys.path)
    shipped = ship_package(spark)
    assert ship_package(spark) == shipped
    includes = spark.sparkContext._python_includes
    assert includes.count(os.path.basename(shipped)) == 1
    assert sys.path == path_before and not any(p.endswith(".zip") and "tidemq-" in p for p in sys.path)
