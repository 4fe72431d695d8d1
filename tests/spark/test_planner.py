"""spark/planner.py: the planner the JVM reader asks (JSON lines in, JSON lines out), over a real
store's files: every op, the partitions' sources, refusals as answers (never a dead process), an
over-long request, and the process itself (``python -m tidemq.spark.planner``)."""

import io
import json
import os
import subprocess
import sys

import pytest

from tidemq.spark import planner
from tidemq.store import Message, MessageStore, StoreConfig


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """Topic A, 2 queues of 5 messages each."""
    root = tmp_path_factory.mktemp("planner") / "store"
    s = MessageStore(StoreConfig(root_dir=str(root), segment_size_bytes=64 * 1024, index_enabled=False)).start()
    s.create_topic("A", 2)
    assert s.put_batch([Message("A", b"m%d" % i) for i in range(10)]).all_ok()
    s.shutdown()
    return str(root)


def ask(op, root, **more):
    return planner.handle(json.dumps({"op": op, "options": {"path": root, "topic": "A"}, **more}).encode())


def test_a_batch_is_one_partition_per_queue_with_where_its_files_are(root):
    got = ask("batch", root)
    assert got["ok"] and got["tiered"] is False
    parts = sorted(got["partitions"], key=lambda p: p["queue"])
    assert [(p["topic"], p["queue"], p["start"], p["end"], p["failOnDataLoss"]) for p in parts] == \
        [("A", 0, 0, 5, True), ("A", 1, 0, 5, True)]
    src = parts[1]["source"]
    assert src["mode"] == "file" and src["commitlogDirs"] == [os.path.join(root, "commitlog")]
    assert src["queueDir"] == os.path.join(root, "consumequeue", "A", "1")
    split = planner.handle(json.dumps({"op": "batch", "options": {"path": root, "topic": "A",
                                                                  "maxRecordsPerPartition": "2"}}).encode())
    assert len(split["partitions"]) == 6


def test_stream_ops_give_offsets_as_a_checkpoint_holds_them(root):
    assert json.loads(ask("initial", root)["offsets"]) == {"A": {"0": 5, "1": 5}}        # latest by default
    assert json.loads(ask("report_latest", root)["offsets"]) == {"A": {"0": 5, "1": 5}}
    start = json.dumps({"A": {"0": 0, "1": 0}})
    assert json.loads(ask("latest", root, start=start, maxRows=4)["offsets"]) == {"A": {"0": 2, "1": 2}}
    target = json.dumps({"A": {"0": 1, "1": 3}})
    assert json.loads(ask("latest", root, start=start, target=target)["offsets"]) == {"A": {"0": 1, "1": 3}}
    got = ask("partitions", root, start=start, end=target)
    assert sorted((p["queue"], p["start"], p["end"]) for p in got["partitions"]) == [(0, 0, 1), (1, 0, 3)]


def test_refusals_are_answers_with_the_python_error_type(root):
    assert ask("nope", root) == {"ok": False, "error": "ValueError", "message": "tidemq planner: unknown op 'nope'"}
    bad = planner.handle(json.dumps({"op": "batch", "options": {"path": root}}).encode())
    assert bad["ok"] is False and bad["error"] == "ValueError" and "'topic'" in bad["message"]
    past = planner.handle(json.dumps({"op": "batch", "options": {"path": root, "topic": "A",
                                                                 "endingOffsets": '{"A": {"0": 9}}'}}).encode())
    assert past["error"] == "ValueError" and "past its end 5" in past["message"]
    assert planner.handle(b"{oops")["error"] == "JSONDecodeError"
    assert planner.handle(b"[1]") == {"ok": False, "error": "ValueError",
                                      "message": "tidemq planner: a request is a JSON object"}
    got = ask("latest", root, start='{"A": 3}')
    assert got["ok"] is False and "offsets must be a JSON object of objects" in got["message"]


def test_serve_answers_line_by_line_and_refuses_an_over_long_request(root, monkeypatch):
    monkeypatch.setattr(planner, "REQUEST_MAX_BYTES", 4096)
    req = json.dumps({"op": "describe", "options": {"path": root, "topic": "A"}}).encode()
    inp = io.BytesIO(req + b"\n\n" + b"x" * 10000 + b"\n" + req + b"\n")
    out = io.BytesIO()
    planner.serve(inp, out)
    answers = [json.loads(x) for x in out.getvalue().splitlines()]
    assert answers[0] == {"ok": True, "tiered": False} == answers[2]
    assert answers[1]["ok"] is False and "at most 4096" in answers[1]["message"]


def test_the_process_answers_on_stdout_and_ends_with_its_stdin(root):
    req = json.dumps({"op": "batch", "options": {"path": root, "topic": "A"}})
    got = subprocess.run([sys.executable, "-m", "tidemq.spark.planner"], input=(req + "\n" + req + "\n").encode(),
                         capture_output=True, timeout=120)
    assert got.returncode == 0, got.stderr
    lines = got.stdout.splitlines()
    assert len(lines) == 2 and all(json.loads(x)["ok"] for x in lines)


def test_a_tiered_read_is_named_and_its_partitions_say_where_the_archive_is(root, tmp_path):
    dest = str(tmp_path / "archive")
    opts = {"path": root, "topic": "A", "archivePath": dest}
    ask_t = lambda op, **more: planner.handle(json.dumps({"op": op, "options": opts, **more}).encode())  # noqa: E731
    assert ask_t("describe") == {"ok": True, "tiered": True}
    got = ask_t("batch")
    assert got["ok"] and got["tiered"] is True and len(got["partitions"]) == 2
    where = {"dest": dest, "runs": None, "gapsFile": os.path.join(root, "archive", "gaps.json")}
    assert all(p["archive"] == where and p["archived"] is False for p in got["partitions"])   # all in the log
    got = ask_t("partitions", start='{"A": {"0": 0}}', end='{"A": {"0": 5}}')
    assert got["ok"] and [(p["queue"], p["start"], p["end"], p["archived"]) for p in got["partitions"]] == [(0, 0, 5, False)]
    assert "archive" not in ask("batch", root)["partitions"][0]                                # untiered: none
