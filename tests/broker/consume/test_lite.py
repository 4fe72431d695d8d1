"""Lite subscriptions are bounded over every group: each client id a SyncLiteSubscription names (any
string) keeps up to lite_subscriptions_per_client_max names, so without a bound one user could fill
the broker's memory with client ids. Selection by them: test_select.py."""

from tidemq.broker.consume.lite import SWEEP_S, LiteSubscriptions
from tidemq.protocol.stubs import Code, pb

A = pb.LiteSubscriptionAction


def test_past_clients_max_the_gone_go_first_then_new_clients_are_refused():
    alive, now = {}, [0.0]
    lite = LiteSubscriptions(4, lambda n: None, lambda cid: alive.get(cid, True), clients_max=3,
                             now_s=lambda: now[0])
    for cid in ("c1", "c2", "c3"):
        assert lite.sync("g", "T", cid, A.PARTIAL_ADD, ["x"]) == (Code.OK, "")
    code, text = lite.sync("g", "T", "c4", A.PARTIAL_ADD, ["x"])
    assert code == Code.LITE_SUBSCRIPTION_QUOTA_EXCEEDED and "3" in text
    assert lite.sync("g", "T", "c1", A.PARTIAL_ADD, ["y"]) == (Code.OK, ""), "a kept client still changes its set"
    lite.declare("g2", ["T"], "c5")
    assert ("g2", "T") not in lite.subs, "a lite consumer's settings are bounded the same way"
    alive["c2"] = False
    now[0] += SWEEP_S
    assert lite.sync("g", "T", "c4", A.PARTIAL_ADD, ["x"]) == (Code.OK, "")
    assert set(lite.subs[("g", "T")]) == {"c1", "c3", "c4"}


def test_when_full_the_gone_are_looked_for_at_most_every_sweep_s():
    """Refused subscriptions repeated do not make the broker ask about every client each time (a
    walk over up to CLIENTS_MAX subscriptions per call): once per SWEEP_S at most."""
    asked, now = [], [0.0]

    def alive(cid):
        asked.append(cid)
        return True

    lite = LiteSubscriptions(4, lambda n: None, alive, clients_max=2, now_s=lambda: now[0])
    for cid in ("c1", "c2"):
        assert lite.sync("g", "T", cid, A.PARTIAL_ADD, ["x"]) == (Code.OK, "")
    for _ in range(50):
        assert lite.sync("g", "T", "c3", A.PARTIAL_ADD, ["x"])[0] == Code.LITE_SUBSCRIPTION_QUOTA_EXCEEDED
    assert len(asked) == 2, "one look at the two clients, not fifty"
    now[0] += SWEEP_S
    assert lite.sync("g", "T", "c3", A.PARTIAL_ADD, ["x"])[0] == Code.LITE_SUBSCRIPTION_QUOTA_EXCEEDED
    assert len(asked) == 4


def test_the_client_table_is_told_who_has_subscriptions():
    """on_hold(client, True) at a client's first subscription, False when its last goes, whichever
    way (sessions/clients.py never forgets a client held: forgotten, it would count as gone)."""
    told = []
    alive = {}
    lite = LiteSubscriptions(4, lambda n: None, lambda cid: alive.get(cid, True))
    lite.on_hold = lambda cid, held: told.append((cid, held))
    lite.declare("g", ["T"], "a")
    assert lite.sync("g", "T", "a", pb.LiteSubscriptionAction.PARTIAL_ADD, ["x"]) == (Code.OK, "")
    assert lite.sync("g2", "T", "a", pb.LiteSubscriptionAction.PARTIAL_ADD, ["y"]) == (Code.OK, "")
    assert lite.sync("g", "T", "b", pb.LiteSubscriptionAction.PARTIAL_ADD, ["z"]) == (Code.OK, "")
    assert told == [("a", True), ("b", True)]
    lite.forget("a")
    alive["b"] = False
    assert lite.sets("g", "T", "c") is None
    assert told[2:] == [("a", False), ("b", False)] and lite.holds() == []
    assert lite._n == sum(len(b) for b in lite.subs.values()) == 0


def test_one_user_cannot_fill_the_table_for_the_others():
    """Past per_user_max subscriptions of one user (authentication on: ``user<TAB>id``), its new one
    is refused (the gone of its own forgotten first); another user's is kept, and the table's bound
    over every user stays."""
    alive, now = {}, [0.0]
    lite = LiteSubscriptions(4, lambda n: None, lambda cid: alive.get(cid, True), clients_max=10,
                             now_s=lambda: now[0], per_user_max=3)
    for i in range(3):
        assert lite.sync("g", "T", f"mallory\tc{i}", A.PARTIAL_ADD, ["x"]) == (Code.OK, "")
    code, text = lite.sync("g2", "T", "mallory\tc9", A.PARTIAL_ADD, ["x"])
    assert code == Code.LITE_SUBSCRIPTION_QUOTA_EXCEEDED and "mallory" in text
    lite.declare("g3", ["T"], "mallory\tc8")
    assert ("g3", "T") not in lite.subs, "a lite consumer's settings are bounded the same way"
    assert lite.sync("g", "T", "mallory\tc0", A.COMPLETE_ADD, ["y"]) == (Code.OK, ""), "its kept ones still change"
    for i in range(3):
        assert lite.sync("g", "T", f"alice\tc{i}", A.PARTIAL_ADD, ["x"]) == (Code.OK, ""), "another user's"
    alive["mallory\tc1"] = False
    now[0] += SWEEP_S
    assert lite.sync("g2", "T", "mallory\tc9", A.PARTIAL_ADD, ["x"]) == (Code.OK, ""), "its gone one forgotten"
    lite.forget("mallory\tc0")
    assert lite.sync("g2", "T", "mallory\tc7", A.PARTIAL_ADD, ["x"]) == (Code.OK, ""), "a client that ended"
