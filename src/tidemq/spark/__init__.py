"""tidemq on Apache Spark: the ``tidemq`` data source (batch, stream, sink) and the archive job.

    from tidemq.spark import register, session
    spark = session()                      # local[*] with tidemq's settings, or bring your own
    register(spark)
    df = spark.read.format("tidemq").option("endpoints", "127.0.0.1:8081").option("topic", "T").load()

The classes Spark pickles (the data source, its readers and writers) live in tidemq.spark.entry
and are sent by value: a worker needs only pyspark to unpickle them, and they import the real
reader (tidemq.spark.source) and writer (tidemq.spark.sink) where they run, failing with one
line naming the fix where tidemq or a dependency is missing.
"""

from __future__ import annotations

import os
import sys


def spark_env() -> None:
    """What Spark needs from the environment: loopback driver address, this interpreter for workers."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def session(master: str = "local[*]", app: str = "tidemq", **conf):
    """A SparkSession with the UI off and few shuffle partitions (tidemq's jobs are narrow), tidemq registered."""
    spark_env()
    from pyspark.sql import SparkSession
    b = (SparkSession.builder.master(master).appName(app)
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.driver.host", "127.0.0.1"))
    for k, v in conf.items():
        b = b.config(k.replace("_", "."), v)
    spark = b.getOrCreate()
    register(spark)
    return spark


def register(spark, ship: bool = True) -> None:
    """Register the ``tidemq`` data source with this session and, unless ``ship=False``, send the
    tidemq package to the executors (a zip of the package this driver imports: SparkContext.addPyFile,
    or the session's artifacts through Spark Connect). The executors still need tidemq's
    dependencies installed (README, Spark); without ship, tidemq itself too."""
    from pyspark import cloudpickle

    from . import entry
    cloudpickle.register_pickle_by_value(entry)       # the classes Spark pickles unpickle without tidemq
    entry.TidemqDataSource.package = None
    if ship:
        from .ship import ship_package
        with open(ship_package(spark), "rb") as f:
            entry.TidemqDataSource.package = f.read()   # for the stream runner, which gets no pyFiles
    spark.dataSource.register(entry.TidemqDataSource)


__all__ = ["register", "session", "spark_env"]
