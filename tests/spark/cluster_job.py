"""The driver of test_cluster.py, run as its own process (one SparkContext per process): on a
standalone master or through a Spark Connect server (MASTER sc://...), the STEPS in order, each
in the same session, each printing one JSON line: {"step": STEP, "ok": true, "reader": "jvm"|"python"}
(the reader that holds the name ``tidemq``: tidemq.spark.register's answer) or {"step": STEP,
"ok": false, "error": "..."}.

    python cluster_job.py MASTER ENDPOINT STEP...

- ``noship``: register(ship=False), then read topic In through the broker and write every row to
  topic Out through the sink (executors without tidemq: expected to fail, naming the fix);
- ``ship``: register() (the package shipped), then the same copy;
- ``stream:CHECKPOINT``: the copy as a stream (availableNow, checkpointed at CHECKPOINT) into
  topic Streamed.

The steps share one driver (and, on a standalone master, one application and its executors), so
that a cluster's driver and executor JVMs start once for all of them.
"""

import json
import sys

from pyspark.sql import SparkSession

import tidemq.spark


def main(master: str, endpoint: str, *steps: str) -> None:
    if master.startswith("sc://"):                  # a Spark Connect server
        spark = SparkSession.builder.remote(master).getOrCreate()
    else:
        spark = (SparkSession.builder.master(master).appName("tidemq-cluster-test")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
                 .config("spark.executor.memory", "512m").config("spark.cores.max", "1")
                 .config("spark.sql.shuffle.partitions", "1").config("spark.task.maxFailures", "1")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
    try:
        for step in steps:
            print(json.dumps({"step": step, **job(spark, endpoint, step)}), flush=True)
    finally:
        spark.stop()


def job(spark, endpoint: str, step: str) -> dict:
    kind, _, checkpoint = step.partition(":")
    try:
        reader = tidemq.spark.register(spark, ship=(kind != "noship"))
        source = spark.readStream if kind == "stream" else spark.read
        df = (source.format("tidemq").option("endpoints", endpoint).option("topic", "In")
              .option("startingOffsets", "earliest").load()
              .selectExpr("body", "tags", "keys", "map_filter(properties, (k, v) -> k IN ('n', 'note')) AS properties"))
        if kind == "stream":
            q = (df.writeStream.format("tidemq").option("endpoints", endpoint).option("topic", "Streamed")
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
            q.awaitTermination()
            if q.exception() is not None:
                raise RuntimeError(str(q.exception()))
        else:
            df.write.format("tidemq").option("endpoints", endpoint).option("topic", "Out").mode("append").save()
        return {"ok": True, "reader": reader}
    except Exception as e:   # noqa: BLE001 - reported to the test
        return {"ok": False, "error": str(e)}


if __name__ == "__main__":
    main(*sys.argv[1:])
