"""The ``tidemq`` data source as Spark pickles it: thin classes sent *by value*, tidemq imported where used.

Spark pickles the registered DataSource class, and the readers and writers it makes, to
Python workers (the driver's planning workers and the executors). A class of an importable
module is pickled by reference, so a worker whose Python has no ``tidemq`` fails in
pyspark's own unpickling with a bare ``ModuleNotFoundError``. These classes are registered
with cloudpickle *by value* (tidemq.spark.register does it): they arrive anywhere, and
import tidemq's real reader and writer (tidemq.spark.source, tidemq.spark.sink) only when
called, so a worker that cannot import them says so in one line, with the fix.

This module imports nothing of tidemq at its top (what a by-value class references must
unpickle on a worker with pyspark alone). The planning state (a stream's availableNow
target) lives in the real object on the side that made it; what is pickled is the options.
A stream's reader and writer also carry the shipped package's zip (its bytes, when
register shipped it): pyspark gives the streaming source runner, and through Spark Connect
a stream's tasks, no pyFiles / session artifacts, so they put it on their path themselves
where tidemq does not import.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
import tempfile

from pyspark.sql.datasource import (DataSource, DataSourceArrowWriter, DataSourceReader, DataSourceStreamArrowWriter,
                                    DataSourceStreamReader)
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

FIX = ("call tidemq.spark.register(spark) (it ships the tidemq package to the executors), or submit with "
       "`spark-submit --py-files tidemq.zip`, or install tidemq in the executors' Python; they also need "
       "the dependencies pinned in tidemq's pyproject.toml (grpcio, protobuf, rocketmq-python-client, numpy, "
       "pyarrow, and isal for fast CRCs) installed, or a packed environment through spark.archives")


class MissingOnWorker(RuntimeError):
    """A Spark worker's Python cannot import tidemq or one of its dependencies."""


def load_module(name: str):
    """importlib.import_module(name), or MissingOnWorker naming what is missing and the fix. Every
    import of tidemq's code or dependencies on a worker goes through it: these classes' calls, and
    the lazy imports behind them (tidemq.client, i.e. grpc, where the broker is used)."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        missing = e.name or str(e)
        raise MissingOnWorker(f"tidemq: this Spark worker's Python ({sys.executable}) cannot import {missing!r} "
                              f"({e}): {FIX}") from None


def _source():
    return load_module("tidemq.spark.source")


def _sink():
    return load_module("tidemq.spark.sink")


def _use_package(package: bytes) -> None:
    """Put the shipped package's zip (its bytes) first on this process's path."""
    path = os.path.join(tempfile.gettempdir(), f"tidemq-{hashlib.sha1(package).hexdigest()[:12]}.zip")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(package)
        os.replace(tmp, path)
    if path not in sys.path:
        sys.path.insert(0, path)
    importlib.invalidate_caches()


class _Lazy:
    """The real object, made on first use on whichever side uses it; pickled as its options only.
    ``package``: the shipped zip's bytes, for a driver-side process Spark gives no pyFiles to (the
    streaming source runner, through Spark Connect): used there only if tidemq does not import."""

    def __init__(self, options, schema=None, package: bytes | None = None) -> None:
        self.options = options
        self.schema = schema
        self.package = package
        self._impl = None

    keeps_package = False       # streams: through Spark Connect their tasks get no session artifacts either

    def __getstate__(self) -> dict:
        return {"options": self.options, "schema": self.schema, "_impl": None,
                "package": self.package if self.keeps_package else None}

    def _with_package(self, fn):
        """fn(), or, where tidemq does not import and the package came along, fn() with it."""
        try:
            return fn()
        except MissingOnWorker:
            if not self.package:
                raise
            _use_package(self.package)
            return fn()

    def _real(self):
        if self._impl is None:
            self._impl = self._with_package(self._make)
        return self._impl

    def _make(self):
        raise NotImplementedError


class Reader(_Lazy, DataSourceReader):
    def _make(self):
        return _source().TidemqReader(self.options)

    def partitions(self):
        return self._real().partitions()

    def read(self, partition):
        return _source().read_partition(self.options, partition)


class StreamReader(_Lazy, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Keeps the package's bytes when pickled: through Spark Connect a stream's read tasks get no
    session artifacts either (a couple of hundred KiB per task, where a shipped package is used)."""
    keeps_package = True

    def read(self, partition):
        return self._with_package(_source).read_partition(self.options, partition)

    def _make(self):
        return _source().TidemqStreamReader(self.options)

    def initialOffset(self) -> dict:
        return self._real().initialOffset()

    def latestOffset(self, start: dict, limit) -> dict:
        return self._real().latestOffset(start, limit)

    def getDefaultReadLimit(self):
        return self._real().getDefaultReadLimit()

    def reportLatestOffset(self):
        return self._real().reportLatestOffset()

    def prepareForTriggerAvailableNow(self) -> None:
        self._real().prepareForTriggerAvailableNow()

    def partitions(self, start: dict, end: dict):
        return self._real().partitions(start, end)

    def commit(self, end: dict) -> None:
        self._real().commit(end)


class _Writing(_Lazy):
    """Made on the driver, where its write id (the root of its message keys) is fixed: pickled with it."""

    def __init__(self, options, schema=None, package: bytes | None = None) -> None:
        super().__init__(options, schema, package)
        self.write_id = self._real().write_id

    def __getstate__(self) -> dict:
        return {**super().__getstate__(), "write_id": self.write_id}


class Writer(_Writing, DataSourceArrowWriter):
    def _make(self):
        return _sink().TidemqWriter(self.options, self.schema, getattr(self, "write_id", None))

    def write(self, iterator):
        return self._real().write(iterator)

    def commit(self, messages) -> None:
        self._real().commit(messages)

    def abort(self, messages) -> None:
        self._real().abort(messages)


class StreamWriter(_Writing, DataSourceStreamArrowWriter):
    keeps_package = True

    def _make(self):
        return _sink().TidemqStreamWriter(self.options, self.schema, getattr(self, "write_id", None))

    def write(self, iterator):
        return self._real().write(iterator)

    def commit(self, messages, batchId: int) -> None:
        self._real().commit(messages, batchId)

    def abort(self, messages, batchId: int) -> None:
        self._real().abort(messages, batchId)


class TidemqDataSource(DataSource):
    package: bytes | None = None          # set by register(ship=True): pickled with the class (by value)

    @classmethod
    def name(cls) -> str:
        return "tidemq"

    def schema(self):
        return load_module("tidemq.spark.decode").SPARK_SCHEMA

    def reader(self, schema):
        return Reader(self.options)

    def streamReader(self, schema):
        return StreamReader(self.options, package=type(self).package)

    def writer(self, schema, overwrite: bool):
        return Writer(self.options, schema)            # made here, on the driver: task retries share its write id

    def streamWriter(self, schema, overwrite: bool):
        return StreamWriter(self.options, schema, type(self).package)


class TidemqPythonDataSource(TidemqDataSource):
    """The same data source under the name the JVM reader hands work to (writes and
    ``reader=python``): tidemq.spark.register registers it always, and registers
    TidemqDataSource as ``tidemq`` only where the JVM reader does not hold that name."""

    @classmethod
    def name(cls) -> str:
        return "tidemq_python"
