"""`tidemq status`, `send`, `receive` and `group` against a real broker, through click's
CliRunner: human and --json output, exit codes."""

import json

import pytest
from click.testing import CliRunner

from tidemq.cli.main import cli

from ..support.brokers import SMALL

T = "ops"


def run(*args, input=None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)


@pytest.fixture
def broker(broker_factory):
    b = broker_factory(env=SMALL, args=["--auto-create-topics"])
    yield b
    assert b.stop() == 0


def test_send_receive_and_group_lag(broker):
    ep = ("--endpoint", broker.endpoint)
    r = run("send", T, "one", "two", "--tag", "t1", "--key", "k1", "--property", "color=red", *ep)
    assert r.exit_code == 0 and r.output.count(" OK ") == 2
    r = run("send", T, *ep, "--json", input="three\nfour\n")
    sent = json.loads(r.output)
    assert r.exit_code == 0 and [s["status"] for s in sent] == ["OK", "OK"] and not any(s["duplicate"] for s in sent)
    r = run("send", T, "x", "--property", "novalue", *ep)
    assert r.exit_code == 2 and "KEY=VALUE" in r.output

    r = run("receive", T, "--from", "beginning", "--count", 10, "--json", *ep)   # reads, commits nothing
    bodies = sorted(m["body"] for m in json.loads(r.output))
    assert r.exit_code == 0 and bodies == ["four", "one", "three", "two"]
    tagged = [m for m in json.loads(r.output) if m["body"] == "one"][0]
    assert tagged["tag"] == "t1" and tagged["keys"] == ["k1"] and tagged["properties"] == {"color": "red"}
    assert run("group", "status", "g", *ep).exit_code == 1, "nothing consumed by g yet"

    r = run("receive", T, "--group", "g", "--count", 3, "--json", *ep)            # receives and acks
    assert r.exit_code == 0 and len(json.loads(r.output)) == 3
    r = run("group", "status", "g", "--json", *ep)
    rows = json.loads(r.output)
    assert r.exit_code == 0 and sum(x["lag"] for x in rows) == 1 and {x["kind"] for x in rows} == {"pop"}
    assert sum(x["inflight"] for x in rows) == 0, "acked: nothing in flight"
    assert any(x["last_consumed_ms"] for x in rows) and all(x["redelivering"] == 0 for x in rows)
    r = run("group", "status", "g", *ep)
    assert "ago" in r.output and "dead letters 0 (topic %DLQ%g)" in r.output
    r = run("group", "list", *ep)
    assert r.exit_code == 0 and "g" in r.output
    r = run("receive", T, "--group", "g", "--count", 10, *ep)                     # the one left
    assert r.exit_code == 0 and "1 message(s)" in r.output and "acked 1 for group g" in r.output
    assert sum(x["lag"] for x in json.loads(run("group", "status", "g", "--json", *ep).output)) == 0
    r = run("receive", T, "--group", "g", "--json", *ep)                          # nothing left
    assert r.exit_code == 0 and json.loads(r.output) == []
    assert run("receive", T, "--group", "g", "--queue", 0, *ep).exit_code == 2

    # pulls from a position: nothing acked, nothing committed
    r = run("receive", T, "--from", "end", "--json", *ep)
    assert r.exit_code == 0 and json.loads(r.output) == []
    one = [x for x in sent if x["status"] == "OK"][0]
    r = run("receive", T, "--queue", one["queue"], "--offset", one["offset"], "--count", 1, "--json", *ep)
    got = json.loads(r.output)
    assert r.exit_code == 0 and [(m["queue"], m["offset"], m["body"]) for m in got] == [
        (one["queue"], one["offset"], "three")]
    assert run("receive", T, "--offset", 0, *ep).exit_code == 2, "--offset needs --queue"
    assert sum(x["lag"] for x in json.loads(run("group", "status", "g", "--json", *ep).output)) == 0

    r = run("group", "reset", "g", "--topic", T, "--to", "earliest", "--json", *ep)
    assert r.exit_code == 0 and all(d["to"] == 0 and d["kind"] == "pop" for d in json.loads(r.output))
    assert sum(x["lag"] for x in json.loads(run("group", "status", "g", "--json", *ep).output)) == 4
    r = run("group", "reset", "g", "--topic", T, "--to", "latest", *ep)
    assert r.exit_code == 0 and "group g reset" in r.output
    assert sum(x["lag"] for x in json.loads(run("group", "status", "g", "--json", *ep).output)) == 0
    r = run("group", "reset", "g", "--topic", T, "--to", 1, "--json", *ep)        # an offset: 1 on every queue
    ends = {q["id"]: q["max_offset"] for q in json.loads(run("topic", "status", T, "--json", *ep).output)["queues"]}
    assert {d["queue"]: d["to"] for d in json.loads(r.output)} == {q: min(1, end) for q, end in ends.items()}
    assert sum(x["lag"] for x in json.loads(run("group", "status", "g", "--json", *ep).output)) == \
        sum(max(0, end - 1) for end in ends.values())
    stored_ms = json.loads(run("query", "--topic", T, "--key", "k1", "--json", *ep).output)[0]["store_timestamp_ms"]
    r = run("group", "reset", "g", "--topic", T, "--to", stored_ms, "--json", *ep)   # a time: from there on
    assert r.exit_code == 0
    assert sum(x["lag"] for x in json.loads(run("group", "status", "g", "--json", *ep).output)) == 4, \
        "every message was stored at or after the first one's time"
    r = run("group", "reset", "g", "--topic", T, "--to", stored_ms + 3_600_000, "--json", *ep)
    assert sum(x["lag"] for x in json.loads(run("group", "status", "g", "--json", *ep).output)) == 0, "an hour on"
    assert run("group", "reset", "g", "--topic", T, "--to", "soon", *ep).exit_code == 2


def test_status_exits_non_zero_while_writes_are_held(broker):
    ep = ("--endpoint", broker.endpoint)
    r = run("status", *ep)
    assert r.exit_code == 0 and "writes: accepted" in r.output and broker.endpoint in r.output
    st = json.loads(run("status", "--json", *ep).output)
    assert st["verdict"]["writes"] == "accepted" and st["topics"] == 0
    assert {"version", "uptime_s", "root", "alarms", "disk", "rates", "totals", "recovery"} <= set(st)
    # the memory alarm at a watermark the broker is above: sends are held, and every view says so
    # (a disk limit no disk can meet would not do: it is capped where cleanup frees space)
    r = run("alarms", "--set-memory-high-watermark-bytes", 1 << 20, *ep)
    assert r.exit_code == 0, "a change was asked for and made"
    assert f"memory_high_watermark_bytes = {1 << 20} on {broker.endpoint} until it restarts; to keep it, set it in " \
           "[broker] of the TOML file or TIDEMQ_MEMORY_HIGH_WATERMARK_BYTES" in r.output
    r = run("status", *ep)
    assert r.exit_code == 1 and "writes: held" in r.output and "MEMORY_ALARM" in r.output
    st = json.loads(run("status", "--json", *ep).output)
    assert st["verdict"]["writes"] == "held" and [x["code"] for x in st["verdict"]["reasons"]] == ["MEMORY_ALARM"]
    assert run("alarms", "--set-memory-high-watermark-ratio", 0.9, *ep).exit_code == 0
    assert run("status", *ep).exit_code == 0


def test_commands_say_clearly_when_no_broker_answers():
    r = run("status", "--endpoint", "127.0.0.1:1")
    assert r.exit_code == 2 and "UNAVAILABLE" in r.output


def test_query_by_key_id_offset_and_time(broker):
    ep = ("--endpoint", broker.endpoint)
    sent = json.loads(run("send", T, "alpha", "--key", "order-7", "--json", *ep).output)[0]
    run("send", T, "beta", *ep)
    r = run("query", "--topic", T, "--key", "order-7", "--json", *ep)
    found = json.loads(r.output)
    assert r.exit_code == 0 and [m["body"] for m in found] == ["alpha"] and found[0]["keys"] == ["order-7"]
    m = found[0]
    assert m["msg_id"] == sent["message_id"] and m["queue"] == sent["queue"] and m["queue_offset"] == sent["offset"]
    by_id = json.loads(run("query", "--topic", T, "--id", sent["message_id"], "--json", *ep).output)
    assert [x["commitlog_offset"] for x in by_id] == [m["commitlog_offset"]]
    by_offset = json.loads(run("query", "--topic", T, "--offset", m["commitlog_offset"], "--json", *ep).output)
    assert [x["body"] for x in by_offset] == ["alpha"]
    by_time = json.loads(run("query", "--topic", T, "--queue", m["queue"], "--time", m["store_timestamp_ms"],
                             "--json", *ep).output)
    assert by_time[0]["body"] == "alpha"
    r = run("query", "--topic", T, "--key", "nobody", *ep)
    assert r.exit_code == 1 and "no message found" in r.output
    assert run("query", "--topic", T, "--offset", m["commitlog_offset"] + 1, *ep).exit_code == 1, "inside a record"
    assert run("query", "--topic", T, "--key", "a", "--id", "b", *ep).exit_code == 2


def test_topic_status_config_and_clean(broker, tmp_path):
    ep = ("--endpoint", broker.endpoint)
    run("send", T, "a", "b", "c", *ep)
    run("receive", T, "--group", "g", "--count", 1, *ep)
    doc = json.loads(run("topic", "status", T, "--json", *ep).output)
    assert doc["messages"] == 3 and len(doc["queues"]) == 8
    assert doc["bytes"] == sum(q["bytes"] for q in doc["queues"]) > 3 * 91 and doc["bytes_exact"]
    r = run("topic", "status", T, *ep)
    assert f"topic {T}: 3 message(s), {doc['bytes']} B" in r.output and "size" in r.output, r.output
    assert [(g["group"], g["lag"]) for g in doc["groups"]] == [("g", 2)]
    r = run("topic", "status", "nope", *ep)
    assert r.exit_code == 1 and "does not exist" in r.output

    doc = json.loads(run("config", "show", "--json", *ep).output)
    assert doc["store"]["root_dir"] == broker.root and doc["broker"]["metrics_port"] == 0
    assert set(doc["changeable_at_run_time"]) == {"memory_high_watermark_bytes", "memory_high_watermark_ratio",
                                                  "disk_free_limit_bytes"}
    shown = run("config", "show", *ep).output
    marked = {line.split("│")[2].strip() for line in shown.splitlines()
              if line.count("│") >= 5 and "config set (until restart)" in line}
    assert marked == set(doc["changeable_at_run_time"]), shown
    assert "changeable at run time, until the broker restarts" in shown
    r = run("config", "set", "disk_free_limit_bytes", 12345, *ep)
    assert r.exit_code == 0 and "until it restarts" in r.output
    assert json.loads(run("alarms", "--json", *ep).output)["disk"]["limit_bytes"] == 12345
    r = run("config", "set", "segment_size_bytes", 1, *ep)
    assert r.exit_code == 1 and "cannot change at run time" in r.output

    r = run("clean", "--force", *ep, input="n\n")
    assert r.exit_code == 1 and "Aborted" in r.output
    r = run("clean", "--force", "--yes", "--json", *ep)
    rep = json.loads(r.output)
    assert r.exit_code == 0 and rep["deleted_segments"] == 0, "nothing expired in a new store"


def test_topic_delete_asks_then_deletes_and_the_groups_forget_it(broker):
    ep = ("--endpoint", broker.endpoint)
    assert run("send", "doomed", "a", "b", "c", *ep).exit_code == 0
    assert run("receive", "doomed", "--group", "g", "--count", 2, *ep).exit_code == 0
    assert run("group", "status", "g", *ep).exit_code == 0
    r = run("topic", "delete", "doomed", *ep, input="n\n")
    assert r.exit_code == 1 and "nothing deleted" in r.output
    r = run("topic", "delete", "doomed", "--yes", "--json", *ep)
    done = json.loads(r.output)
    assert r.exit_code == 0 and done["messages"] == 3 and done["topic"] == "doomed"
    assert "doomed" not in run("topic", "list", *ep).output
    assert run("group", "status", "g", *ep).exit_code == 1, "its offsets went with it"
    r = run("topic", "delete", "doomed", "--yes", *ep)
    assert r.exit_code == 1 and "does not exist" in r.output
    r = run("topic", "delete", "rmq_sys_wheel_timer", "--yes", *ep)
    assert r.exit_code == 1 and "system topic" in r.output
    # sent again (auto-created): a new topic, its messages only
    assert run("send", "doomed", "new", *ep).exit_code == 0
    r = run("receive", "doomed", "--from", "beginning", "--count", 10, "--json", *ep)
    assert [m["body"] for m in json.loads(r.output)] == ["new"]
