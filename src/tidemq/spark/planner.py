"""The planner the JVM reader asks: ``python -m tidemq.spark.planner``, JSON in, JSON out.

"Python plans, the JVM reads": the JVM data source (src/tidemq/spark/jvm/, Planner.java) keeps
planning in one implementation, tidemq.spark.source's, and asks this process for it. One
request per line on stdin, one answer per line on stdout (UTF-8 JSON objects); the process
serves requests until its stdin closes (the JVM keeps it for the next read). What Python or
tidemq log goes to stderr.

Requests: ``{"op": OP, "options": {the read's options}, ...}``

    describe       {"tiered": bool}: an archive is in play (tidemq.spark.tiered)
    batch          {"tiered": bool, "partitions": [PARTITION, ...]}
    initial        {"offsets": JSON}: a stream's first offsets (startingOffsets, default latest)
    latest         + "start": JSON, "maxRows": n (optional), "target": JSON (optional, availableNow)
                   {"offsets": JSON}: a micro-batch's end
    report_latest  {"offsets": JSON}: the queues' ends now
    partitions     + "start": JSON, "end": JSON
                   {"partitions": [PARTITION, ...]}

Offsets (JSON text, as a stream checkpoints them): ``{"topic": {"queue id": offset}}``.
PARTITION: ``{"topic", "queue", "start", "end", "failOnDataLoss", "source"}`` with source
``{"mode": "file", "queueDir", "commitlogDirs": [...]}`` (absolute paths) or ``{"mode":
"broker", "endpoints": ["host:port", ...], "timeoutMs", "accessKey", "secretKey", "tls",
"rootCertificates"}`` (the members of the broker group holding that queue, its leader first: the
JVM reader fails over among them; the read's connection options, as Connection.java uses them).
A tiered read (an archive in play) adds ``"archived": bool`` (the range lies below the live log:
read from the archive only) and ``"archive": {"dest", "runs": [...] or null, "gapsFile"}`` to
each (RangePartition.java; tidemq.spark.tiered reads the same runs).
Every answer has ``"ok": true``, or is ``{"ok": false, "error": TYPE, "message": TEXT}``
(TYPE: ValueError, DataLossError, ...), the request's fault or the store's, never fatal to
the process. A request line longer than REQUEST_MAX_BYTES is refused.
"""

from __future__ import annotations

import json
import os
import sys

from pyspark.sql.datasource import CaseInsensitiveDict

from . import plan
from .backend import BrokerBackend, FileBackend, backend_for, connection, explain

REQUEST_MAX_BYTES = 16 << 20


def _source(options, backend, topic: str, qid: int) -> dict:
    if isinstance(backend, FileBackend):
        from .. import layout
        files = backend.files
        return {"mode": "file", "commitlogDirs": [os.path.abspath(d) for d in files.commitlog_dirs],
                "queueDir": os.path.abspath(layout.queue_dir(layout.consumequeue_dir(files.root), topic, qid)),
                "deadBefore": files.deleted_topics().get(topic, -1),
                "missing": [list(m) for m in files.missing_segments()]}
    assert isinstance(backend, BrokerBackend)
    conn = connection(options)
    return {"mode": "broker", "endpoints": backend.members(topic, qid),
            "timeoutMs": int(float(options.get("timeoutSeconds", 30)) * 1000),
            "accessKey": conn["access_key"], "secretKey": conn["secret_key"], "tls": bool(conn["tls"]),
            "rootCertificates": conn["root_certificates"]}


def _archive(archive) -> dict | None:
    if archive is None:
        return None
    return {"dest": os.path.abspath(archive.dest), "runs": None if archive.runs is None else list(archive.runs),
            "gapsFile": archive.gaps_file}


def _partitions(p, start: plan.Offsets, end: plan.Offsets) -> list[dict]:
    rs, archive = p.ranges(start, end)
    backend = backend_for(p.options)
    where = _archive(archive)
    try:
        sources: dict = {}
        out = []
        for r in rs:
            key = (r.topic, r.queue_id)
            if key not in sources:
                sources[key] = _source(p.options, backend, r.topic, r.queue_id)
            part = {"topic": r.topic, "queue": r.queue_id, "start": r.start, "end": r.end,
                    "failOnDataLoss": p.fail_on_data_loss, "source": sources[key]}
            if where is not None:
                part.update(archived=r.archived, archive=where)
            out.append(part)
        return out
    finally:
        backend.close()


def _offsets(raw) -> dict:
    got = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(got, dict) or not all(isinstance(v, dict) for v in got.values()):
        raise ValueError(f"tidemq: offsets must be a JSON object of objects, not {raw!r}")
    return {t: {str(q): int(o) for q, o in qs.items()} for t, qs in got.items()}


def answer(req: dict) -> dict:
    """The answer to one request (raises for a bad request or what planning raises)."""
    from .source import Planner
    op = req.get("op")
    p = Planner(req.get("options") or {})
    tiered = p.archive is not None
    if op == "describe":
        return {"tiered": tiered}
    if op == "batch":
        return {"tiered": tiered, "partitions": _partitions(p, *p.batch_bounds())}
    if op == "initial":
        return {"offsets": json.dumps(p.offsets("startingOffsets", "startingTimestamp", plan.LATEST))}
    if op == "report_latest":
        return {"offsets": json.dumps(p.latest())}
    if op == "latest":
        max_rows = req.get("maxRows")
        target = _offsets(req["target"]) if req.get("target") else None
        return {"offsets": json.dumps(p.stream_latest(_offsets(req.get("start") or "{}"),
                                                      int(max_rows) if max_rows else None, target))}
    if op == "partitions":
        return {"partitions": _partitions(p, _offsets(req["start"]), _offsets(req["end"]))}
    raise ValueError(f"tidemq planner: unknown op {op!r}")


def handle(line: bytes) -> dict:
    """One request line to its answer; every failure is an answer too."""
    req = None
    try:
        req = json.loads(line)
        if not isinstance(req, dict):
            raise ValueError("tidemq planner: a request is a JSON object")
        req["options"] = CaseInsensitiveDict(req.get("options") or {})
        return {"ok": True, **answer(req)}
    except Exception as e:                                  # noqa: BLE001 - every failure is the caller's to see
        opts = req.get("options") if isinstance(req, dict) else None
        endpoint = ((opts or {}).get("endpoints") or (opts or {}).get("endpoint") or "").split(",")[0].strip()
        better = explain(e, endpoint, opts) if endpoint else None
        if better is not None:
            e = better
        return {"ok": False, "error": type(e).__name__, "message": str(e)}


def serve(inp, out) -> None:
    """Answer every request line of ``inp`` (binary) on ``out`` (binary) until ``inp`` ends."""
    while True:
        line = inp.readline(REQUEST_MAX_BYTES + 1)
        if not line:
            return
        if not line.strip():
            continue
        if len(line) > REQUEST_MAX_BYTES:                   # the rest of an over-long line is dropped
            size = len(line)
            while line and not line.endswith(b"\n"):
                line = inp.readline(REQUEST_MAX_BYTES)
                size += len(line)
            got = {"ok": False, "error": "ValueError",
                   "message": f"tidemq planner: a request of {size} bytes or more (at most {REQUEST_MAX_BYTES})"}
        else:
            got = handle(line)
        out.write(json.dumps(got).encode() + b"\n")
        out.flush()


def main() -> None:
    import logging
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(name)s: %(message)s")
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr                                 # a stray print must not break the protocol
    serve(sys.stdin.buffer, out)


if __name__ == "__main__":
    main()
