"""tidemq.cli.status: `tidemq status` against a real broker: the verdict on writes, human and --json,
exit 1 while writes are held; a broker that does not answer is exit 2."""

import json

from ..support.cli import run


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
