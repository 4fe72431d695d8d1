"""The member book: every member seen stays known, down once it leaves the live view; the leader's
change is dated at the first look that saw it; leader changes count epochs passed, so none is
missed between two looks."""

from tidemq.broker.observe.members import MemberBook


def view(leader: str, epoch: int, *members: str) -> dict:
    return {"group": "g1", "leader": leader, "epoch": epoch,
            "members": {m: {"endpoint": f"{m}:81", "leader_endpoint": f"{m}:91",
                            "role": "leader" if f"{m}:81" == leader else "follower"} for m in members}}


def test_a_member_killed_stays_known_as_down_until_it_is_back():
    b = MemberBook()
    b.observe(view("m1:81", 3, "m1", "m2", "m3"), "m2", 100.0)
    assert b.counts(100.0) == {"leader": 1, "follower": 2, "down": 0}
    assert b.leader_since_s == 100.0 and not b.leader_since_exact   # it led before this broker looked
    b.observe(view("", 3, "m2", "m3"), "m2", 104.0)                  # m1 killed: no leader yet
    rows = {r["member"]: r for r in b.rows(106.0)}
    assert rows["m1"]["state"] == "down" and rows["m1"]["last_seen_s"] == 100.0 and rows["m1"]["seen_ago_s"] == 6.0
    assert b.counts(106.0) == {"leader": 0, "follower": 2, "down": 1}
    assert b.leader_since_s is None
    b.observe(view("m3:81", 4, "m2", "m3"), "m2", 108.0)             # m3 elected
    s = b.summary(110.0)
    assert s["counts"] == {"leader": 1, "follower": 1, "down": 1}
    assert (s["leader_since_s"], s["leader_since_exact"], s["leader_for_s"]) == (108.0, True, 2.0)
    assert s["leader_changes"] == 1
    b.observe(view("m3:81", 4, "m1", "m2", "m3"), "m2", 120.0)       # m1 back, as a follower
    assert b.counts(120.0) == {"leader": 1, "follower": 2, "down": 0}
    assert b.leader_since_s == 108.0, "the leader did not change"


def test_leader_changes_count_epochs_passed_between_two_looks():
    b = MemberBook()
    b.observe(view("m1:81", 5, "m1", "m2"), "m1", 0.0)
    b.observe(view("m1:81", 8, "m1", "m2"), "m1", 10.0)    # three elections between the looks, same winner
    assert b.leader_changes == 3
    assert b.leader_since_s == 10.0 and b.leader_since_exact


def test_this_member_is_live_even_before_the_coordinator_lists_it():
    b = MemberBook()
    b.observe(view("", 0), "m1", 1.0)
    assert [(r["member"], r["state"]) for r in b.rows(1.0)] == [("m1", "follower")]
