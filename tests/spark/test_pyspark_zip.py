"""scripts/compile_pyspark_zip.py, as scripts/bootstrap.sh runs it: a Python process Spark starts, its
path led by $SPARK_HOME/python/lib/pyspark.zip (PythonWorkerFactory), imports pyspark from the zip
and compiles none of it (zipimport writes no cache: without the compiled code, the streaming source
runner compiled every module it imports before connecting back, past Spark's fixed 10 s on a loaded
machine). Each process a fresh interpreter whose ``compile`` counts what zipimport compiles."""

import json
import os
import subprocess
import sys

import pytest

COUNTING = """import builtins, json, sys
compiled = []
real = builtins.compile
def counting(source, name, *a, **k):
    if "pyspark.zip" in str(name):
        compiled.append(str(name))
    return real(source, name, *a, **k)
builtins.compile = counting
import importlib
m = importlib.import_module(sys.argv[1])
print(json.dumps([m.__file__, len(compiled), compiled[:3]]))
"""


def spark_python_path() -> list[str]:
    """The zips Spark puts first on its Python processes' path (PythonUtils.sparkPythonPath)."""
    from pyspark.find_spark_home import _find_spark_home
    lib = os.path.join(_find_spark_home(), "python", "lib")
    return [os.path.join(lib, n) for n in sorted(os.listdir(lib)) if n.endswith(".zip")]


@pytest.mark.parametrize("module", ["pyspark.sql.streaming.python_streaming_source_runner",
                                    "pyspark.sql.worker.create_data_source", "pyspark.daemon"])
def test_a_python_process_spark_starts_compiles_nothing_of_pyspark(module):
    path = spark_python_path()
    assert any(p.endswith("pyspark.zip") for p in path), path
    r = subprocess.run([sys.executable, "-c", COUNTING, module], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(path)})
    assert r.returncode == 0, r.stderr[-2000:]
    where, compiled, first = json.loads(r.stdout.strip().splitlines()[-1])
    assert "pyspark.zip" in where, "imported from the zip, as Spark's processes do"
    assert compiled == 0, f"compiled from source: {first}"
