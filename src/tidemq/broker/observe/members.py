"""The members of this broker's group as this broker has seen them, live or down: what the cluster
console (the status page, `status --cluster`) and the failover metrics show.

The coordinator's live view (replication/node.py ``view()``: its members' ephemeral nodes, or a
static group's connected followers) names only the members that are there now: a member killed
disappears from it. The book remembers every member seen since this broker started, and when it
was last seen live, so a member that went is shown *down* (and counted, and alerted on) until it is
back. It also notes when the group's leader last changed (``leader_since_s``: the first look that
saw the new leader or epoch; ``exact`` False for the leader found at this broker's start, which
led already) and how many leader changes it has seen (epochs passed since the first look: an epoch
is taken once per election, so none is missed between two looks).

Looks are taken by the caller (each status sampling tick, each status view and scrape), with the
time from the broker's clock: no thread of its own, nothing on the replication path.
"""

from __future__ import annotations

import threading

LEADER, FOLLOWER, DOWN = "leader", "follower", "down"
STATES = (LEADER, FOLLOWER, DOWN)


class MemberBook:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.known: dict[str, dict] = {}       # member -> {"endpoint", "live", "role", "last_seen_s", "first_seen_s"}
        self.leader: str | None = None          # the leader's endpoint at the last look ("" none)
        self.epoch = 0
        self.first_epoch: int | None = None
        self.leader_since_s: float | None = None
        self.leader_since_exact = False
        self.looks = 0

    def observe(self, view: dict, me: str, now_s: float) -> None:
        """One look at the group's live ``view`` (node.view()); ``me`` is this broker's member id."""
        live = {str(m): d for m, d in (view.get("members") or {}).items() if isinstance(d, dict)}
        leader = str(view.get("leader") or "")
        epoch = int(view.get("epoch") or 0)
        with self._lock:
            for m, d in live.items():
                k = self.known.setdefault(m, {"first_seen_s": now_s})
                k.update(endpoint=str(d.get("endpoint", "")), live=True, last_seen_s=now_s, epoch=epoch,
                         role=LEADER if leader and d.get("endpoint") == leader else FOLLOWER)
            if me and me not in live:
                k = self.known.setdefault(me, {"first_seen_s": now_s, "endpoint": ""})
                k.update(live=True, last_seen_s=now_s, epoch=epoch,
                         role=LEADER if k.get("endpoint") == leader and leader else FOLLOWER)
            for m, k in self.known.items():
                if m not in live and m != me:
                    k["live"] = False
            if self.first_epoch is None:
                self.first_epoch = epoch
                self.leader, self.epoch = leader, epoch
                self.leader_since_s, self.leader_since_exact = (now_s if leader else None), False
            elif (leader, epoch) != (self.leader, self.epoch):
                if leader != self.leader or epoch > self.epoch:
                    self.leader_since_s = now_s if leader else None
                    self.leader_since_exact = True
                self.leader, self.epoch = leader, max(epoch, self.epoch)
            self.looks += 1

    @property
    def leader_changes(self) -> int:
        """Elections seen since this broker started (epochs passed since its first look)."""
        return max(0, self.epoch - (self.first_epoch or 0)) if self.first_epoch is not None else 0

    def rows(self, now_s: float) -> list[dict]:
        """Every member known: member, endpoint, state (leader, follower, down), the group's epoch
        when it was last seen live, last seen."""
        with self._lock:
            out = []
            for m, k in sorted(self.known.items()):
                state = (k.get("role") or FOLLOWER) if k.get("live") else DOWN
                out.append({"member": m, "endpoint": k.get("endpoint", ""), "state": state,
                            "epoch": k.get("epoch", 0), "last_seen_s": round(k["last_seen_s"], 3),
                            "seen_ago_s": round(max(0.0, now_s - k["last_seen_s"]), 1)})
            return out

    def counts(self, now_s: float) -> dict[str, int]:
        """Members per state (every state present, 0 when none)."""
        out = dict.fromkeys(STATES, 0)
        for r in self.rows(now_s):
            out[r["state"]] += 1
        return out

    def summary(self, now_s: float) -> dict:
        """What status.json carries under replication.console."""
        return {"members": self.rows(now_s), "counts": self.counts(now_s),
                "leader_since_s": self.leader_since_s, "leader_since_exact": self.leader_since_exact,
                "leader_for_s": round(now_s - self.leader_since_s, 1) if self.leader_since_s is not None else None,
                "leader_changes": self.leader_changes}
