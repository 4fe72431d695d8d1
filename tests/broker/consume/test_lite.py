"""Lite subscriptions are bounded over every group: each client id a SyncLiteSubscription names (any
string) keeps up to lite_subscriptions_per_client_max names, so without a bound one user could fill
the broker's memory with client ids. Selection by them: test_select.py."""

from tidemq.broker.consume.lite import LiteSubscriptions
from tidemq.protocol.stubs import Code, pb

A = pb.LiteSubscriptionAction


def test_past_clients_max_the_gone_go_first_then_new_clients_are_refused():
    alive = {}
    lite = LiteSubscriptions(4, lambda n: None, lambda cid: alive.get(cid, True), clients_max=3)
    for cid in ("c1", "c2", "c3"):
        assert lite.sync("g", "T", cid, A.PARTIAL_ADD, ["x"]) == (Code.OK, "")
    code, text = lite.sync("g", "T", "c4", A.PARTIAL_ADD, ["x"])
    assert code == Code.LITE_SUBSCRIPTION_QUOTA_EXCEEDED and "3" in text
    assert lite.sync("g", "T", "c1", A.PARTIAL_ADD, ["y"]) == (Code.OK, ""), "a kept client still changes its set"
    lite.declare("g2", ["T"], "c5")
    assert ("g2", "T") not in lite.subs, "a lite consumer's settings are bounded the same way"
    alive["c2"] = False
    assert lite.sync("g", "T", "c4", A.PARTIAL_ADD, ["x"]) == (Code.OK, "")
    assert set(lite.subs[("g", "T")]) == {"c1", "c3", "c4"}
