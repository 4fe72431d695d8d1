"""spark/__init__.py: register() on a session the user built (no spark.jars) puts the JVM reader's
jar where every thread of the driver finds it: a read from another Python thread (another py4j
thread of the JVM) uses the JVM reader too. Its own process: one SparkContext per process."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(600)

JOB = """
import json, sys, threading
from pyspark.sql import SparkSession
import tidemq.spark as ts
from tidemq.store import Message, MessageStore, StoreConfig
root = sys.argv[1]
s = MessageStore(StoreConfig(root_dir=root, segment_size_bytes=64 * 1024, index_enabled=False)).start()
s.create_topic("T", 2)
s.put_batch([Message("T", b"m%d" % i) for i in range(20)])
s.shutdown()
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.driver.host", "127.0.0.1").getOrCreate())
out = {"registered": ts.register(spark, ship=False)}
def other():
    out["provider"] = ts._provider_class(spark)
    out["rows"] = spark.read.format("tidemq").option("path", root).option("topic", "T").option("reader", "jvm").load().count()
t = threading.Thread(target=other)
t.start()
t.join()
print(json.dumps(out))
spark.stop()
"""


def test_register_on_a_users_session_serves_every_thread(tmp_path, jvm_reader):
    if not jvm_reader:
        pytest.skip("the JVM reader is not available (no javac)")
    r = subprocess.run([sys.executable, "-c", JOB, str(tmp_path / "store")], capture_output=True, text=True,
                       timeout=600, cwd=str(tmp_path), env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    assert lines, r.stderr[-3000:]
    assert json.loads(lines[-1]) == {"registered": "jvm", "provider": "org.tidemq.spark.TidemqProvider", "rows": 20}
