"""The driver of test_cluster.py, run as its own process (one SparkContext per process): on a
standalone master or through a Spark Connect server (MASTER sc://...), read topic In through the broker and write every row to topic Out through the
sink. Prints one JSON line: {"ok": true, "reader": "jvm"|"python"} (the reader that holds the name
``tidemq``: tidemq.spark.register's answer) or {"ok": false, "error": "..."}.

    python cluster_job.py MASTER ENDPOINT ship|noship [CHECKPOINT]

With CHECKPOINT the copy is a stream (availableNow) checkpointed there.
"""

import json
import sys

from pyspark.sql import SparkSession

import tidemq.spark


def main(master: str, endpoint: str, ship: str, checkpoint: str | None = None) -> None:
    if master.startswith("sc://"):                  # a Spark Connect server
        spark = SparkSession.builder.remote(master).getOrCreate()
        return job(spark, endpoint, ship, checkpoint)
    spark = (SparkSession.builder.master(master).appName("tidemq-cluster-test")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .config("spark.executor.memory", "512m").config("spark.cores.max", "1")
             .config("spark.sql.shuffle.partitions", "1").config("spark.task.maxFailures", "1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    job(spark, endpoint, ship, checkpoint)


def job(spark, endpoint: str, ship: str, checkpoint: str | None) -> None:
    try:
        reader = tidemq.spark.register(spark, ship=(ship == "ship"))
        source = spark.readStream if checkpoint else spark.read
        df = (source.format("tidemq").option("endpoints", endpoint).option("topic", "In")
              .option("startingOffsets", "earliest").load()
              .selectExpr("body", "tags", "keys", "map_filter(properties, (k, v) -> k IN ('n', 'note')) AS properties"))
        if checkpoint:
            q = (df.writeStream.format("tidemq").option("endpoints", endpoint).option("topic", "Out")
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
            q.awaitTermination()
            if q.exception() is not None:
                raise RuntimeError(str(q.exception()))
        else:
            df.write.format("tidemq").option("endpoints", endpoint).option("topic", "Out").mode("append").save()
        print(json.dumps({"ok": True, "reader": reader}), flush=True)
    except Exception as e:   # noqa: BLE001 - reported to the test
        print(json.dumps({"ok": False, "error": str(e)}), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
