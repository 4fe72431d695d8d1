"""tidemq on Apache Spark: the ``tidemq`` data source (batch, stream, sink) and the archive job.

    from tidemq.spark import register, session
    spark = session()                      # local[*] with tidemq's settings, or bring your own
    register(spark)
    df = spark.read.format("tidemq").option("endpoints", "127.0.0.1:8081").option("topic", "T").load()

Two readers, one planner ("Python plans, the JVM reads"): where a JDK's javac is on the
driver, ``format("tidemq")`` is a JVM data source (src/tidemq/spark/jvm/, compiled on first use
by tidemq.spark.jar) that asks tidemq.spark.planner for the plan and reads the partitions in
the executors' JVMs; elsewhere it is the Python data source (tidemq.spark.entry / source),
which also takes what the JVM one hands it (writes, ``reader=python``) under the
name ``tidemq_python``. The option ``reader`` (auto, jvm, python) or the session conf
``spark.tidemq.reader`` picks one; both give the same rows.

The classes Spark pickles (the data source, its readers and writers) live in tidemq.spark.entry
and are sent by value: a worker needs only pyspark to unpickle them, and they import the real
reader (tidemq.spark.source) and writer (tidemq.spark.sink) where they run, failing with one
line naming the fix where tidemq or a dependency is missing.
"""

from __future__ import annotations

import logging
import os
import sys

log = logging.getLogger("tidemq.spark")

READERS = ("auto", "jvm", "python")
PROVIDER = "org.tidemq.spark.TidemqProvider"


def spark_env() -> None:
    """What Spark needs from the environment: loopback driver address, this interpreter for workers."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def _reader(value) -> str:
    r = (value or "auto").strip().lower()
    if r not in READERS:
        raise ValueError(f"tidemq: reader must be one of {', '.join(READERS)}, not {value!r}")
    return r


def session(master: str = "local[*]", app: str = "tidemq", reader: str | None = None, **conf):
    """A SparkSession with the UI off and few shuffle partitions (tidemq's jobs are narrow), tidemq
    registered; unless ``reader="python"``, the JVM reader's jar in ``spark.jars`` (built when
    javac is there: tidemq.spark.jar)."""
    spark_env()
    from pyspark.sql import SparkSession
    reader = _reader(reader or conf.get("spark_tidemq_reader"))
    b = (SparkSession.builder.master(master).appName(app)
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.driver.host", "127.0.0.1"))
    jars = [j for j in str(conf.pop("spark_jars", "")).split(",") if j]
    if reader != "python":
        from .jar import jar_path
        jar = jar_path()
        if jar:
            jars.append(jar)
    if jars:
        b = b.config("spark.jars", ",".join(jars))
    for k, v in conf.items():
        b = b.config(k.replace("_", "."), v)
    spark = b.getOrCreate()
    register(spark, reader=reader)
    return spark


def register(spark, ship: bool = True, reader: str | None = None) -> str:
    """Register the ``tidemq`` data source with this session; which reader holds the name: "jvm"
    or "python" (returned).

    ``reader``: "auto" (the JVM reader where it can be built and loaded), "jvm" (that, or an
    error), "python" (the Python data source only; the conf spark.tidemq.reader is set to it).
    Default: the session's conf spark.tidemq.reader, else auto. On a classic session the jar is
    built (tidemq.spark.jar) and added (the driver's class loader that all its threads share, and
    SparkContext.addJar for the executors) unless already there; through Spark Connect the JVM reader is used only where the connect server was
    started with the jar (``--jars``: ``python -m tidemq.spark.jar`` prints its path).

    Unless ``ship=False``, the tidemq package is sent to the executors (a zip of the package this
    driver imports: SparkContext.addPyFile, or the session's artifacts through Spark Connect): the
    Python reader and the sink run there. The executors still need tidemq's dependencies installed
    (README, Spark); without ship, tidemq itself too. The JVM reader's executors need only the jar."""
    from pyspark import cloudpickle

    from . import entry
    from .ship import is_connect
    if reader is None:
        reader = _reader(spark.conf.get("spark.tidemq.reader", None))
    else:
        reader = _reader(reader)
        spark.conf.set("spark.tidemq.reader", reader)
    # the JVM reader's planner: this interpreter, importing tidemq from where this process does
    spark.conf.set("spark.tidemq.python", sys.executable)
    spark.conf.set("spark.tidemq.pythonPath", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    cloudpickle.register_pickle_by_value(entry)       # the classes Spark pickles unpickle without tidemq
    entry.TidemqDataSource.package = None
    if ship:
        from .ship import ship_package
        with open(ship_package(spark), "rb") as f:
            entry.TidemqDataSource.package = f.read()   # for the stream runner, which gets no pyFiles
    spark.dataSource.register(entry.TidemqPythonDataSource)
    jvm = reader != "python" and not is_connect(spark) and _load_jvm(spark)
    if not _register_python(spark, entry.TidemqDataSource):
        jvm = True                                  # the name is the JVM reader's (the jar is on the classpath)
    if reader == "jvm" and not jvm:
        raise RuntimeError("tidemq: reader='jvm' but the JVM reader could not be loaded into this session "
                           "(see the log line above)")
    return "jvm" if jvm else "python"


def _register_python(spark, source) -> bool:
    """Register ``source`` as ``tidemq``; False where Spark refuses because a JVM data source holds the name."""
    try:
        spark.dataSource.register(source)
    except Exception as e:                         # noqa: BLE001 - pyspark's AnalysisException, classic or Connect
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(e):
            raise
        return False
    return True


def _provider_class(spark) -> str | None:
    """The class Spark's data-source lookup finds for ``tidemq`` on this driver (None: none)."""
    jvm = spark._jvm
    try:
        cls = jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            "tidemq", spark._jsparkSession.sessionState().conf())
        return cls.getName()
    except Exception:                              # noqa: BLE001 - py4j's error: not found (or not loadable)
        return None


def _load_jvm(spark) -> bool:
    """Put the JVM reader's jar in this classic session unless it is there; whether the lookup finds it."""
    found = _provider_class(spark)
    if found == PROVIDER:
        return True
    if found is not None:                          # a Python "tidemq" registered earlier, or another source
        log.warning("tidemq: the name 'tidemq' is already taken in this session (%s): the JVM reader is not used",
                    found)
        return False
    from .jar import jar_path
    jar = jar_path()
    if jar is None:
        return False
    _add_jar(spark, jar)
    if _provider_class(spark) != PROVIDER:
        log.warning("tidemq: the JVM reader's jar %s was added but Spark's lookup does not find it: reads use "
                    "the Python data source", jar)
        return False
    return True


def _add_jar(spark, jar: str) -> None:
    """The jar to the executors (SparkContext.addJar) and to the driver's class loader that every
    thread of the driver uses: the outermost MutableURLClassLoader above this thread's (spark-submit's,
    which py4j's threads share). ``ADD JAR`` would put it in a loader only the calling thread is
    switched to: another Python thread (another py4j thread) would not find ``tidemq`` at all.
    Without such a loader (a JVM started otherwise), ``ADD JAR``."""
    jvm = spark._jvm
    mutable = jvm.java.lang.Class.forName("org.apache.spark.util.MutableURLClassLoader")
    loader, shared = jvm.java.lang.Thread.currentThread().getContextClassLoader(), None
    while loader is not None:
        if mutable.isInstance(loader):
            shared = loader
        loader = loader.getParent()
    if shared is None:
        spark.sql(f"ADD JAR '{jar}'")
        return
    shared.addURL(jvm.java.io.File(jar).toURI().toURL())
    spark.sparkContext._jsc.sc().addJar(jar)          # pyspark has no addJar of its own


__all__ = ["register", "session", "spark_env"]
