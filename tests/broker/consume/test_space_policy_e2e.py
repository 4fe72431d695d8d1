"""The space policy of a topic on a real broker over a small tmpfs (consume/positions.py gives the
store what the groups consumed): with ``refuse`` writes are refused before an unconsumed message
of a subscribed group is deleted, the group drains, and writes come back by themselves with every
message delivered; with ``evict`` space pressure deletes unconsumed messages and the loss is told
per group (the log at WARNING, `tidemq disk`'s last cleanup, the metrics)."""

from __future__ import annotations

import re
import urllib.request

from tidemq.client import Producer, PullConsumer
from tidemq.protocol.stubs import Code

from ...support.brokers import admin_call, free_port
from ...support.wait import wait_until

BODY = 32 << 10
ENV = {"TIDEMQ_SEGMENT_SIZE_BYTES": str(1 << 20), "TIDEMQ_INDEX_SLOTS": "1000", "TIDEMQ_INDEX_ENTRIES": "4000",
       "TIDEMQ_CLEAN_RESOURCE_INTERVAL_MS": "100", "TIDEMQ_DELETE_COMMIT_LOG_FILES_INTERVAL_MS": "0",
       # the store's own verdict, not the broker's disk alarm (tests/broker/protection/test_alarms_e2e.py)
       "TIDEMQ_DISK_FREE_LIMIT_BYTES": str(64 << 10)}
SENDS_MAX = 4000          # 125 MiB of bodies: a bound, far beyond the 24 MiB disk


def body(i: int) -> bytes:
    return b"%08d|" % i + bytes([i % 251]) * (BODY - 9)


def verdict(endpoint: str) -> dict:
    return admin_call(endpoint, "DiskStatus")["verdict"]


def codes(endpoint: str) -> set[str]:
    return {r["code"] for r in verdict(endpoint)["reasons"]}


def drain(c: PullConsumer, topic: str, queues: int, group_commit: bool = True) -> list[bytes]:
    got = []
    for q in range(queues):
        off = c.committed(topic, q) or 0
        while True:
            r = c.pull(topic, q, off, batch_size=64)
            got += [m.body for m in r.messages]
            if r.next_offset <= off:
                break
            off = r.next_offset
        if group_commit:
            c.commit(topic, q, off)
    return got


def test_refuse_refuses_writes_until_the_group_drains_and_loses_nothing(env, broker_factory):
    root = env.tmpfs("root", 24)
    b = broker_factory(root, env=ENV)
    assert admin_call(b.endpoint, "CreateTopic", {"name": "R", "queues": 2, "space_policy": "refuse"}) == {
        "ok": True, "topic": "R", "queues": 2, "space_policy": "refuse", "message_type": "mixed"}
    listed = {t["topic"]: t for t in admin_call(b.endpoint, "ListTopics")["topics"]}
    assert listed["R"]["space_policy"] == "refuse"
    assert admin_call(b.endpoint, "TopicStatus", {"topic": "R"})["space_policy"] == "refuse"
    with PullConsumer(b.endpoint, group="G") as c, Producer(b.endpoint) as p:
        for q in range(2):
            c.commit("R", q, 0)                          # G is subscribed, at the start
        sent: list[bytes] = []
        refused = None
        for i in range(SENDS_MAX):
            r = p.send_batch("R", [body(i)])[0]
            if not r.ok:
                refused = r
                break
            sent.append(body(i))
        assert refused is not None, f"{SENDS_MAX} sends of {BODY} bytes into 24 MiB were never refused"
        assert refused.code == Code.TOO_MANY_REQUESTS, refused
        wait_until(lambda: "UNCONSUMED_BACKLOG" in codes(b.endpoint),
                   "the verdict to say space is held by what G has not consumed")
        v = verdict(b.endpoint)
        assert v["writes"] == "refused"
        why = next(r["text"] for r in v["reasons"] if r["code"] == "UNCONSUMED_BACKLOG")
        assert "group(s) G" in why and "topic R" in why, why
        again = p.send_batch("R", [b"while held"])[0]
        assert again.code == Code.TOO_MANY_REQUESTS and "have not consumed" in again.error, again
        disk = admin_call(b.endpoint, "DiskStatus")["status"]
        assert disk["last_round"]["why_not_code"] == "unconsumed", disk["last_round"]
        assert not disk["last_cleanup"]["deleted"], "nothing unconsumed was deleted"

        got = drain(c, "R", 2)                           # G reads everything and commits
        assert sorted(got) == sorted(sent), f"{len(got)} of {len(sent)} acknowledged messages delivered"

        def accepted():
            r = p.send_batch("R", [b"after"])[0]
            return r.ok or (r.code == Code.TOO_MANY_REQUESTS and None)
        wait_until(accepted, "writes to come back by themselves once G consumed (cleanup frees the space)",
                   interval_s=0.1)
        assert verdict(b.endpoint)["writes"] == "accepted"
        disk = admin_call(b.endpoint, "DiskStatus")["status"]
        assert disk["last_cleanup"]["deleted"] and not disk["last_cleanup"]["groups_lost"], disk["last_cleanup"]
    assert b.stop() == 0


def test_evict_deletes_unconsumed_messages_and_says_which_group_lost_which(env, broker_factory):
    root = env.tmpfs("root", 24)
    mport = free_port()
    b = broker_factory(root, env={**ENV, "TIDEMQ_METRICS_PORT": str(mport)})
    assert admin_call(b.endpoint, "CreateTopic", {"name": "E", "queues": 2})["space_policy"] == "evict"
    with PullConsumer(b.endpoint, group="G") as c, Producer(b.endpoint) as p:
        for q in range(2):
            c.commit("E", q, 0)                          # G is subscribed and never consumes
        with PullConsumer(b.endpoint, group="keeps-up") as k:
            for i in range(SENDS_MAX):
                r = p.send_batch("E", [body(i)])[0]
                if not r.ok:
                    # a writer faster than cleanup (a busy machine) meets the disk's warning ratio:
                    # refused for a full disk, never for a backlog, and accepted again once cleanup ran
                    assert r.code == Code.TOO_MANY_REQUESTS and "UNCONSUMED_BACKLOG" not in codes(b.endpoint), r
                    wait_until(lambda: verdict(b.endpoint)["writes"] == "accepted", "cleanup to make room",
                               interval_s=0.05)
                if i % 50 == 0:
                    drain(k, "E", 2)                     # a group that keeps up loses nothing
                if i % 50 == 0 and admin_call(b.endpoint, "DiskStatus")["status"]["commitlog"]["evicted_by_group"]:
                    break
            drain(k, "E", 2)
        st = wait_until(lambda: (lambda s: s if s["last_cleanup"]["groups_lost"] else None)(
            admin_call(b.endpoint, "DiskStatus")["status"]), "a cleanup that took what G had not consumed")
    lost = st["last_cleanup"]["groups_lost"]
    assert {g["group"] for g in lost} == {"G"}, lost
    assert all(g["topic"] == "E" and g["first"] >= 0 and g["end"] > g["first"] for g in lost), lost
    evicted = {(e["group"], e["topic"]): e["messages"] for e in st["commitlog"]["evicted_by_group"]}
    assert set(evicted) == {("G", "E")} and evicted[("G", "E")] > 0, evicted
    with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=60) as r:
        text = r.read().decode()
    m = re.search(r'tidemq_group_messages_evicted_total\{group="G",topic="E"\} (\S+)', text)
    assert m and float(m.group(1)) >= evicted[("G", "E")], [ln for ln in text.splitlines() if "evicted" in ln]
    assert 'group="keeps-up"' not in text.split("tidemq_group_messages_evicted")[1].split("# HELP")[0]
    assert b.stop() == 0
    log = b.proc.stderr.read()
    said = [ln for ln in log.splitlines() if "consumer groups lost messages" in ln]
    assert said and "WARNING" in said[0] and "G E/" in said[0], log[-3000:]
