"""Administration of a cluster from any member's endpoint (issue 33.1): the coordinator's topology
says which broker groups own which queues of a topic, and every such group is asked.

    cluster = Cluster.of(endpoint, config_file)     # None: a broker in no group, or no coordinator
    answers = cluster.ask(cluster.owners(topic), "TopicStatus", {"topic": topic})
    # {group: answer}; an answer {"ok": False, "code": "UNREACHABLE", ...} for a group none of whose
    # members answered: a view says which, and exits 1

A view goes to a group's leader, else to any of its live members (a follower answers the leader's
copied state); a change goes to the leader only (a follower refuses it, NOT_LEADER, naming it).
"""

from __future__ import annotations

from .common import admin_call


class Cluster:
    def __init__(self, doc: dict, config_file: str | None) -> None:
        self.doc = doc
        self.config_file = config_file

    @classmethod
    def of(cls, endpoint: str, config_file: str | None) -> "Cluster | None":
        """The cluster the broker at ``endpoint`` is a member of (through its coordinator), or None for
        a broker on its own (in no group, or a group without a coordinator)."""
        r = admin_call(endpoint, "Cluster", config_file=config_file, check=False)
        if r.get("code") == "UNREACHABLE":
            admin_call(endpoint, "Cluster", config_file=config_file)      # exits 2 with what is wrong
        c = r.get("cluster") if r.get("ok") else None
        if not c or not c.get("coordinator"):
            return None
        return cls(c, config_file)

    @property
    def groups(self) -> list[str]:
        return sorted(self.doc.get("groups", {}))

    def owners(self, topic: str) -> dict[str, list[int]] | None:
        """{group: its queue ids} of a topic spread over the cluster, None for a topic the topology
        does not know (a topic of one group)."""
        t = self.doc.get("topics", {}).get(topic)
        return {g: list(q) for g, q in t.get("owners", {}).items()} if isinstance(t, dict) else None

    def endpoints(self, group: str, leader_only: bool = False) -> list[str]:
        """The group's leader first, then (unless ``leader_only``) its other live members."""
        g = self.doc.get("groups", {}).get(group) or {}
        leader = (g.get("leader") or {}).get("endpoint") or ""
        out = [leader] if leader else []
        if not leader_only:
            out += sorted(m.get("endpoint", "") for m in (g.get("members") or {}).values()
                          if m.get("endpoint") and m.get("endpoint") != leader)
        return out

    def ask(self, groups, method: str, request: dict, leader_only: bool = False) -> dict[str, dict]:
        """{group: the first answer of its endpoints (an unreachable one: the next)}."""
        out = {}
        for g in sorted(groups):
            eps = self.endpoints(g, leader_only)
            r = {"ok": False, "code": "UNREACHABLE",
                 "error": f"group {g} has no {'leader' if leader_only else 'live member'} in the coordinator"}
            for ep in eps:
                r = admin_call(ep, method, request, self.config_file, check=False)
                if r.get("code") != "UNREACHABLE":
                    r["endpoint"] = ep
                    break
            out[g] = r
        return out


def holders(cluster: Cluster, topic: str) -> tuple[dict[str, list[int]], dict[str, dict]]:
    """A topic the topology does not know (made on one group, not spread): ({group: its queue ids}
    for every group that has it, every group's TopicStatus answer)."""
    answers = cluster.ask(cluster.groups, "TopicStatus", {"topic": topic})
    return {g: [q["id"] for q in r["queues"]] for g, r in answers.items() if r.get("ok")}, answers


def unreachable(answers: dict[str, dict]) -> list[str]:
    """'group: why' for every group that did not answer."""
    return [f"{g}: {r.get('error', 'no answer')}" for g, r in answers.items() if r.get("code") == "UNREACHABLE"]


def merge_topic_status(topic: str, answers: dict[str, dict], owners: dict[str, list[int]]) -> dict:
    """One TopicStatus of the whole cluster: each queue from the group that owns it, the groups' lag
    summed; ``groups_detail``: each broker group's own answer (for --verbose)."""
    queues, lag, exact = [], {}, True
    for g, r in answers.items():
        if not r.get("ok"):
            continue
        mine = set(owners.get(g, ()))
        for q in r["queues"]:
            if q["id"] in mine:
                queues.append({**q, "group": g})
                exact = exact and q.get("bytes_exact", True)
        for x in r.get("groups", ()):
            d = lag.setdefault(x["group"], {"group": x["group"], "lag": 0, "inflight": 0})
            d["lag"] += x["lag"]
            d["inflight"] += x["inflight"]
    queues.sort(key=lambda q: q["id"])
    policy = next((r.get("space_policy") for r in answers.values() if r.get("ok")), None)
    return {"topic": topic, "space_policy": policy, "queues": queues, "messages": sum(q["messages"] for q in queues),
            "bytes": sum(q["bytes"] for q in queues), "bytes_exact": exact,
            "groups": [lag[k] for k in sorted(lag)], "owners": owners,
            "groups_detail": {g: ({k: v for k, v in r.items() if k != "ok"}) for g, r in answers.items()}}
