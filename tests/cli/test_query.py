"""tidemq.cli.query: `tidemq query` finds messages of a real broker by key, message id, commit-log
offset and queue and time; nothing found is exit 1, two ways at once exit 2."""

import json

from ..support.cli import run

T = "ops"


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
