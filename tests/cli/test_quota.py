"""`tidemq quota set|list` against a real broker: a topic's produce quota delays an answer over its
rate and refuses (TOO_MANY_REQUESTS) one whose debt passes quota_throttle_ms_max, nothing stored; a
fetch quota charges what a pull read; counted per entity (quota list and the metrics)."""

import json

from tidemq.client import Producer, PullConsumer
from tidemq.protocol.stubs import Code

from ..support.cli import run


def test_quotas_delay_then_refuse_and_are_counted(broker):
    ep = ("--endpoint", broker.endpoint)
    assert run("topic", "create", "Q", "--queues", "1", *ep).exit_code == 0
    r = run("quota", "set", "--topic", "Q", "--produce-bytes-per-s", 1000, "--fetch-bytes-per-s", 1000, *ep)
    assert r.exit_code == 0 and "topic:Q: produce 1000 bytes/s, fetch 1000 bytes/s" in r.output, r.output
    assert run("quota", "set", "--user", "u", "--topic", "Q", "--produce-bytes-per-s", 1, *ep).exit_code == 2
    assert run("quota", "set", "--user", "u", *ep).exit_code == 2
    with Producer(broker.endpoint) as p:
        assert p.send_batch("Q", [b"x" * 900]).all_ok()                     # within the second's worth
        assert p.send_batch("Q", [b"y" * 1000]).all_ok(), "over the rate: answered, late"
        r = p.send_batch("Q", [b"z" * 100_000])                             # ~100 s of debt: past 30 s
        assert [x.code for x in r] == [Code.TOO_MANY_REQUESTS] and "quota" in r[0].error
    with PullConsumer(broker.endpoint) as c:
        got = c.pull_records("Q", 0, 0).messages()
        assert sorted(len(m.body) for m in got) == [900, 1000], "the refused send stored nothing"
    doc = json.loads(run("quota", "list", "--json", *ep).output)
    assert doc["quotas"] == {"topic:Q": {"produce": 1000, "fetch": 1000}}
    st = {(s["entity"], s["direction"]): s for s in doc["stats"]}
    assert st[("topic:Q", "produce")]["throttled"] >= 1 and st[("topic:Q", "produce")]["refused"] == 1
    assert st[("topic:Q", "produce")]["bytes"] >= 1900, "the requests' bytes (bodies and their fields)"
    assert st[("topic:Q", "fetch")]["bytes"] >= 1900, "the records read"
    assert run("quota", "set", "--topic", "Q", "--produce-bytes-per-s", 0, "--fetch-bytes-per-s", 0, *ep).exit_code == 0
    with Producer(broker.endpoint) as p:
        assert p.send_batch("Q", [b"z" * 100_000]).all_ok(), "no quota: no limit"
