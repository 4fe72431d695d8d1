"""The cluster console: one broker group as an operator reads it, from one member's replication
status (replication/node.py status() with the member book's summary, members.py): every member
known, live or down, with its state, the epoch it was last seen in, its lag where this member knows
it (a leader knows every follower's; a follower its own), when it was last seen; the leader and
since when; the coordinator's session; and the group's health.

Health, as the status page colours it and `status --cluster` prints it:

    ok           a leader, every known member live (a follower refusing writes is normal: NOT_LEADER)
    member_down  a member known is down (killed, stopped, cut off): red, and TidemqMemberDown
    no_leader    no member leads: the group's writes are refused: red, and TidemqGroupWithoutLeader
"""

from __future__ import annotations

from .members import DOWN, LEADER

OK, MEMBER_DOWN, NO_LEADER = "ok", "member_down", "no_leader"


def group_console(rep: dict) -> dict:
    """{"group", "epoch", "leader", "leader_member", "leader_since_s", "leader_for_s", "leader_since_exact",
    "leader_changes", "members": [...], "health", "seen_by", "coordinator_session"} of ``rep``."""
    book = rep.get("console") or {}
    lags = {}
    for f in rep.get("followers") or ():
        lags[f["member"]] = {"lag_bytes": f["lag_bytes"], "lag_seconds": f["lag_seconds"], "in_sync": f["in_sync"],
                             "connected": f["connected"]}
    r = rep.get("replica")
    if r:
        lags[rep["member"]] = {"lag_bytes": r["lag_bytes"], "lag_seconds": None, "in_sync": None,
                               "connected": r["connected"]}
    members = []
    for m in book.get("members") or ():
        row = dict(m)
        row.update(lags.get(m["member"], {"lag_bytes": None, "lag_seconds": None, "in_sync": None}))
        if m["state"] == LEADER:
            row.update(lag_bytes=0, lag_seconds=0.0)
        if m["member"] == rep["member"]:
            row["epoch"] = rep["epoch"] or rep["known_epoch"]
            row["this"] = True
        members.append(row)
    leader_member = next((m["member"] for m in members if m["state"] == LEADER), None)
    if rep.get("role") == "leader":             # this member leads: a fenced one takes no writes
        leader_member = None if rep.get("fenced") else rep["member"]
    down = [m["member"] for m in members if m["state"] == DOWN]
    health = NO_LEADER if leader_member is None else MEMBER_DOWN if down else OK
    return {"group": rep["group"], "epoch": rep["epoch"] or rep["known_epoch"], "leader": rep.get("leader") or "",
            "leader_member": leader_member, "leader_since_s": book.get("leader_since_s"),
            "leader_since_exact": book.get("leader_since_exact", False), "leader_for_s": book.get("leader_for_s"),
            "leader_changes": book.get("leader_changes", 0), "members": members, "down": down, "health": health,
            "seen_by": rep["member"], "mode": rep.get("mode"),
            "coordinator": rep.get("coordinator"), "coordinator_session": rep.get("coordinator_session")}
