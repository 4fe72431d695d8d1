"""Partitions of a broker group of three on a real ZooKeeper, made with TCP proxies (proxy.py): each
member reaches ZooKeeper through a proxy of its own (its ``--coordinator``), and is reached on its
port -- by its followers' replication, by the calls other members forward -- through another (its
advertised endpoint). The official Python client produces without pause through the group's
leader ports (not proxied: a client keeps reaching every member).

Scenarios, one after the other on the same group, each from a settled group (one leader, both
followers in its in-sync set) and back to one: the leader cut from ZooKeeper only; from its
followers only; from both; stopped (SIGSTOP) past its session. Each is held ``hold_s``, healed, and
the group must settle again. A consumer on every member reads all along (Readers). Then
everything is read back from the leader and counted per scenario: acknowledged, lost
(acknowledged, not stored), stored twice, served to a consumer and then cut (not in the final log
as served), the time from the fault to the first write accepted that began after it, and the
longest time between two acknowledged writes while it lasted (how long no leader could take a
write, as a client sees it).
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter

from .failover import TOPIC, Sends, produce
from .group import Group
from .proxy import HoldingProxy
from .wait import patience, wait_until

SCENARIOS = ("leader cut from ZooKeeper", "leader cut from its followers", "leader cut from both",
             "leader stopped past its session")


class Readers:
    """A consumer on every member (tidemq.client PullRecords, each queue from where it left off, a
    round every 50 ms until stopped): what each was served, (queue, queue offset) -> (body, when,
    member), to compare with the log that stays (``cut``: served, then not in it as served)."""

    def __init__(self, g: Group, topic: str) -> None:
        self.g, self.topic = g, topic
        self.served: dict[tuple[int, int, int], tuple[bytes, float]] = {}     # (member, queue, offset)
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(3)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def _run(self, i: int) -> None:
        from tidemq.client import PullConsumer
        cursors: dict[int, int] = {}
        while not self.stop.is_set():
            try:
                with PullConsumer(self.g.endpoint(i), timeout_s=2, **self.g.client) as c:
                    n = c.queue_count(self.topic)
                    while not self.stop.is_set():
                        for q in range(n):
                            r = c.pull_records(self.topic, q, cursors.get(q, 0), max_count=256)
                            if r.found:
                                now = time.monotonic()
                                for m in r.messages():
                                    self.served[(i, q, m.queue_offset)] = (bytes(m.body), now)
                                cursors[q] = r.next_offset
                        self.stop.wait(0.05)
            except Exception:  # noqa: BLE001 - a member stopped, cut or restarting: try again
                self.stop.wait(0.2)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)

    def cut(self, final: dict[tuple[int, int], bytes], began: float = 0.0, ended: float = float("inf")) -> int:
        """Records served between ``began`` and ``ended`` that the final log does not hold as served."""
        return len(self.cut_records(final, began, ended))

    def cut_records(self, final: dict[tuple[int, int], bytes], began: float = 0.0,
                    ended: float = float("inf")) -> list[tuple[int, int, int, bytes, float, bytes | None]]:
        """(member, queue, queue offset, body served, when, body the final log holds there) of each record
        ``cut`` counts: which member served what, to tell a hole from a miscount."""
        return [(i, q, off, body, at, final.get((q, off))) for (i, q, off), (body, at) in list(self.served.items())
                if began <= at <= ended and final.get((q, off)) != body]


def read_queues(g: Group, i: int, topic: str) -> dict[tuple[int, int], bytes]:
    """(queue, queue offset) -> body of every message of ``topic`` on member i."""
    from tidemq.client import PullConsumer
    out = {}
    with PullConsumer(g.endpoint(i), timeout_s=60, **g.client) as c:
        for q in range(c.queue_count(topic)):
            off, end = 0, c.query_offset(topic, q, "END")
            while off < end:
                r = c.pull_records(topic, q, off)
                out.update({(q, m.queue_offset): bytes(m.body) for m in r.messages()})
                off = r.next_offset
    return out


class PartitionedGroup:
    def __init__(self, base_dir: str, zk_endpoint: str, mode: str = "SYNC", env: dict | None = None) -> None:
        zk_port = int(zk_endpoint.rsplit(":", 1)[1])
        self.zk = [HoldingProxy(zk_port) for _ in range(3)]
        self.g = Group(base_dir, 3, coordinator=[p.endpoint for p in self.zk], mode=mode, env=env)
        self.inbound = [HoldingProxy(port) for port in self.g.ports]

    def start(self, i: int) -> None:
        self.g.start(i, env={"TIDEMQ_ADVERTISED_ENDPOINT": self.inbound[i].endpoint})

    def start_all(self) -> None:
        for i in range(3):
            self.start(i)

    def settled(self) -> int | None:
        """The leader, once one leads and both followers are in its in-sync set with its whole log."""
        leader = self.g.leader()
        if leader is None:
            return None
        st = self.g.status(leader) or {}
        if sorted(st.get("in_sync") or ()) != sorted(f"g-{i}" for i in range(3)):
            return None
        return leader if all(self.g.in_sync(leader, i) for i in range(3) if i != leader) else None

    def wait_settled(self) -> int:
        return wait_until(lambda: (x,) if (x := self.settled()) is not None else None, "a settled group")[0]

    def fault(self, name: str, leader: int, on: bool) -> None:
        if name == SCENARIOS[0]:
            self.zk[leader].cut() if on else self.zk[leader].heal()
        elif name == SCENARIOS[1]:
            self.inbound[leader].cut() if on else self.inbound[leader].heal()
        elif name == SCENARIOS[2]:
            for p in (self.zk[leader], self.inbound[leader]):
                p.cut() if on else p.heal()
        else:
            self.g.signal(leader, signal.SIGSTOP if on else signal.SIGCONT)

    def close(self) -> None:
        for i in range(3):
            if self.g.alive(i):
                self.g.signal(i, signal.SIGCONT)
        self.g.kill_all()
        for p in self.zk + self.inbound:
            p.close()


def run(base_dir: str, zk_endpoint: str, mode: str = "SYNC", hold_s: float = 4.5, scenarios=SCENARIOS,
        env: dict | None = None, log=print) -> dict:
    from rocketmq import ClientConfiguration, Credentials, Producer

    from .official import start
    pg = PartitionedGroup(base_dir, zk_endpoint, mode, env)
    sends = Sends()
    windows: list[tuple[str, float, float]] = []
    report: dict = {"mode": mode, "hold_s": hold_s, "scenarios": []}
    producer = None
    readers = Readers(pg.g, TOPIC)
    try:
        pg.start_all()
        pg.wait_settled()
        readers.start()
        conf = ClientConfiguration(pg.g.official_endpoints, Credentials(), request_timeout=10)
        producer = start(lambda: Producer(conf, (TOPIC,)))
        t = threading.Thread(target=produce, args=(producer, sends, 2_000_000), daemon=True)
        t.start()
        for name in scenarios:
            leader = pg.wait_settled()
            base = len(sends.acked)
            wait_until(lambda: len(sends.acked) >= base + 20, "acknowledged sends before the fault")
            began = time.monotonic()
            pg.fault(name, leader, True)
            time.sleep(hold_s)                  # the fault lasts this long (what is asserted comes after)
            pg.fault(name, leader, False)
            healed = time.monotonic()
            new = pg.wait_settled()
            wait_until(lambda: len(sends.acked_since(healed)) >= 5, "writes acknowledged after healing")
            ended = time.monotonic()
            windows.append((name, began, ended))
            acks = sorted(d for _b, d in list(sends.acked.values()))
            before = [d for d in acks if d <= began]
            done = before[-1:] + [d for d in acks if began < d <= ended]       # from the last ack before it
            gaps = [b - a for a, b in zip(done, done[1:])]
            first = sends.acked_since(began)
            rec = {"scenario": name, "leader": f"g-{leader}", "leader_after": f"g-{new}",
                   "to_first_write_s": round(first[0] - began, 3) if first else None,
                   "longest_gap_s": round(max(gaps), 3) if gaps else None}
            report["scenarios"].append(rec)
            log(f"{name}: {rec}")
        sends.stop.set()
        t.join(timeout=patience())
        leader = pg.wait_settled()
        readers.close()
        final = read_queues(pg.g, leader, TOPIC)
        bodies = pg.g.read_topic(leader, TOPIC)
        counts = Counter(bodies)
        stored = {int(b[1:]) for b in counts}
        twice = {int(b[1:]) for b, c in counts.items() if c > 1}
        for rec, (name, began, ended) in zip(report["scenarios"], windows):
            acked = [s for s, (_b, d) in sends.acked.items() if began - 5 <= d <= ended]
            rec["acked"] = len(acked)
            rec["lost"] = sum(1 for s in acked if s not in stored)
            rec["twice"] = sum(1 for s in acked if s in twice)
            rec["served_then_cut"] = readers.cut(final, began, ended)
        report.update({"acked": len(sends.acked), "failed_sends": sends.failed, "send_errors": dict(sends.errors),
                       "stored": len(bodies), "lost": len([s for s in sends.acked if s not in stored]),
                       "twice": len(twice), "served": len(readers.served), "served_then_cut": readers.cut(final),
                       "logs_equal": len({(pg.g.status(i) or {}).get("log_end") for i in range(3)}) == 1})
        return report
    finally:
        sends.stop.set()
        readers.close()
        if producer is not None:
            try:
                producer.shutdown()
            except Exception:  # noqa: BLE001 - a client of stopped brokers
                pass
        pg.close()
