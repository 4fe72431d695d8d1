"""tidemq.cli.group: `tidemq group status` (lag, in flight, last consumed) and `group reset` (to
earliest, latest, an offset, a time) against a real broker, following what `send` stored and `receive`
consumed; `receive` as a group acks, from a position it commits nothing."""

import datetime
import json

from ..support.cli import run

T = "ops"


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

    r = run("group", "reset", "g", "--topic", T, "--to", "earliest", *ep)
    assert r.exit_code == 1 and "live consumers" in r.output, "it just consumed: Kafka refuses too"
    r = run("group", "reset", "g", "--topic", T, "--to", "earliest", "--dry-run", "--json", *ep)
    assert r.exit_code == 0 and json.loads(r.output)["dry_run"] and all(d["to"] == 0 for d in json.loads(r.output)["reset"])
    assert sum(x["lag"] for x in json.loads(run("group", "status", "g", "--json", *ep).output)) == 0, "dry run"
    r = run("group", "reset", "NOSUCH", "--topic", T, "--to", "earliest", "--force", *ep)
    assert r.exit_code == 1 and "creates no group" in r.output
    assert "NOSUCH" not in run("group", "list", *ep).output, "a reset created no group"
    r = run("group", "reset", "g", "--topic", T, "--to", "earliest", "--force", "--json", *ep)
    assert r.exit_code == 0 and all(d["to"] == 0 and d["kind"] == "pop" for d in json.loads(r.output))
    assert sum(x["lag"] for x in json.loads(run("group", "status", "g", "--json", *ep).output)) == 4
    r = run("group", "reset", "g", "--topic", T, "--to", "latest", "--force", *ep)
    assert r.exit_code == 0 and "group g reset" in r.output
    assert sum(x["lag"] for x in json.loads(run("group", "status", "g", "--json", *ep).output)) == 0
    r = run("group", "reset", "g", "--topic", T, "--to", 1, "--force", "--json", *ep)   # an offset: 1 on every queue
    ends = {q["id"]: q["max_offset"] for q in json.loads(run("topic", "status", T, "--json", *ep).output)["queues"]}
    assert {d["queue"]: d["to"] for d in json.loads(r.output)} == {q: min(1, end) for q, end in ends.items()}
    assert sum(x["lag"] for x in json.loads(run("group", "status", "g", "--json", *ep).output)) == \
        sum(max(0, end - 1) for end in ends.values())
    stored_ms = json.loads(run("query", "--topic", T, "--key", "k1", "--json", *ep).output)[0]["store_timestamp_ms"]
    r = run("group", "reset", "g", "--topic", T, "--to", stored_ms, "--force", "--json", *ep)   # a time: from there on
    assert r.exit_code == 0
    assert sum(x["lag"] for x in json.loads(run("group", "status", "g", "--json", *ep).output)) == 4, \
        "every message was stored at or after the first one's time"
    r = run("group", "reset", "g", "--topic", T, "--to", stored_ms + 3_600_000, "--force", "--json", *ep)
    assert sum(x["lag"] for x in json.loads(run("group", "status", "g", "--json", *ep).output)) == 0, "an hour on"
    assert run("group", "reset", "g", "--topic", T, "--to", "soon", *ep).exit_code == 2
    iso = datetime.datetime.fromtimestamp(stored_ms / 1000 + 3600, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    r = run("group", "reset", "g", "--topic", T, "--to", "earliest", "--force", *ep)
    r = run("group", "reset", "g", "--topic", T, "--to", iso, "--force", "--json", *ep)      # ISO 8601, UTC
    assert r.exit_code == 0
    assert sum(x["lag"] for x in json.loads(run("group", "status", "g", "--json", *ep).output)) == 0, "an hour on"
    r = run("group", "reset", "g", "--topic", T, "--to", "-1h", "--force", "--json", *ep)     # relative: an hour ago
    assert r.exit_code == 0
    assert sum(x["lag"] for x in json.loads(run("group", "status", "g", "--json", *ep).output)) == 4
    r = run("group", "reset", "g", "--topic", T, "--offsets", "0=0", "--force", "--json", *ep)  # one queue only
    assert r.exit_code == 0 and [d["queue"] for d in json.loads(r.output)] == [0]
    assert run("group", "reset", "g", "--topic", T, "--offsets", "0:1", *ep).exit_code == 2
    assert run("group", "reset", "g", "--topic", T, "--offsets", "99=1", "--force", *ep).exit_code == 1


def test_times_iso_8601_relative_and_milliseconds():
    from tidemq.cli.group import parse_to
    assert parse_to("2026-11-27T05:00Z") == {"timestamp_ms": 1_795_755_600_000}
    assert parse_to("2026-11-27T06:00+01:00") == {"timestamp_ms": 1_795_755_600_000}
    assert parse_to("-1h", now_s=10_000.0) == {"timestamp_ms": 6_400_000}
    assert parse_to("-30m", now_s=10_000.0) == {"timestamp_ms": 8_200_000}
    assert parse_to("-2d", now_s=10.0) == {"timestamp_ms": 0}, "before the epoch: 0"
    assert parse_to("1795755600000") == {"timestamp_ms": 1_795_755_600_000}
    assert parse_to("42") == {"to": 42} and parse_to("latest") == {"to": "latest"}
    import click
    import pytest
    for bad in ("soon", "-1y", "2026-13-01"):
        with pytest.raises(click.BadParameter):
            parse_to(bad)


def test_numbers_are_ascii_digits_and_anything_else_is_a_cli_error():
    """A superscript two is a digit to str.isdigit and no number to int(): --to / --offsets given one
    (or another script's digits, or a number past an int64) are refused as bad parameters (exit 2,
    naming the option), never a ValueError's traceback; nothing reaches a broker (none is running)."""
    from tidemq.cli.group import parse_offsets, parse_to
    ep = ("--endpoint", "127.0.0.1:9")
    for to in ("²", "1²", "٣", "-²h", "-1e400h", "9" * 400, "-" + "9" * 400 + "w", "２０２６-11-27T05:00Z"):
        r = run("group", "reset", "g", "--topic", T, "--to", to, *ep)
        assert r.exit_code == 2 and "--to" in r.output and "ASCII digits" in r.output, (to, r.output)
    for offsets in ("0=²", "²=1", "0=٣", "0=" + "9" * 20, "1234567=0"):
        r = run("group", "reset", "g", "--topic", T, "--offsets", offsets, *ep)
        assert r.exit_code == 2 and "--offsets" in r.output and "ASCII digits" in r.output, (offsets, r.output)
    assert parse_to("9223372036854775807") == {"timestamp_ms": (1 << 63) - 1}
    assert parse_offsets("0=42, 1=9223372036854775807") == {"0": 42, "1": (1 << 63) - 1}
