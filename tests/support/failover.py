"""The failover scenario (a test with a few kills, scripts/failover.py with many): a broker group of
three on a real ZooKeeper, the official Python client producing without pause through the
group's leader ports, the leader killed with SIGKILL again and again (each time a follower takes
the lease, the old leader comes back and follows), then everything read back from whichever
member leads at the end.

What it measures: messages acknowledged, and of those lost or stored twice (0 and 0 with SYNC
replication); per kill, the time from the kill to the first write accepted after it (a send
begun after the kill and acknowledged); with ASYNC replication, each kill's loss against the lag
the leader reported for the follower that took over, just before the kill.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from .group import Group
from .wait import patience, wait_until

TOPIC = "FailoverT"
RECORD_OVERHEAD = 181          # a record's bytes besides its topic and body here (header, UNIQ_KEY and the
                               # official client's properties): lost bytes comparable with the lag reported


@dataclass
class Sends:
    acked: dict = field(default_factory=dict)        # seq -> (begun, done)
    failed: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    errors: Counter = field(default_factory=Counter)

    def acked_since(self, t: float) -> list[float]:
        return sorted(done for begun, done in list(self.acked.values()) if begun > t)


def produce(producer, sends: Sends, seq_max: int) -> None:
    """Send one message after another until told to stop (each acknowledged send timed)."""
    from .official import msg
    seq = 0
    while not sends.stop.is_set() and seq < seq_max:
        m = msg(TOPIC, b"m%09d" % seq)
        begun = time.monotonic()
        try:
            producer.send(m)
            sends.acked[seq] = (begun, time.monotonic())
        except Exception as e:  # noqa: BLE001 - a refused or failed send is not acknowledged: counted
            sends.failed += 1
            sends.errors[type(e).__name__] += 1
            sends.stop.wait(0.02)
        seq += 1


def run(base_dir: str, zk: str, kills: int, mode: str = "SYNC", per_kill_acks: int = 30,
        seq_max: int = 2_000_000, log=print) -> dict:
    from rocketmq import ClientConfiguration, Credentials, Producer

    from .official import start
    g = Group(base_dir, 3, coordinator=zk, mode=mode)
    sends = Sends()
    report: dict = {"mode": mode, "kills": [], "members": 3}
    kill_times: list[float] = []
    producer = None
    try:
        g.start_all()
        g.wait_all_in_sync()
        conf = ClientConfiguration(g.official_endpoints, Credentials(), request_timeout=10)
        producer = start(lambda: Producer(conf, (TOPIC,)))
        t = threading.Thread(target=produce, args=(producer, sends, seq_max), daemon=True)
        t.start()
        for k in range(kills):
            leader = g.wait_leader()
            others = [i for i in range(3) if i != leader]
            g.wait_in_sync(leader, others) if mode == "SYNC" else None
            base = len(sends.acked)
            wait_until(lambda: len(sends.acked) >= base + per_kill_acks or sends.stop.is_set(),
                       "acknowledged sends before the kill")
            st = g.status(leader) or {}
            lag = {f["member"]: f["lag_bytes"] for f in st.get("followers", [])}
            acked_before = set(sends.acked)
            killed_at = time.monotonic()
            kill_times.append(killed_at)
            g.kill(leader)
            new = g.wait_leader(exclude={leader})
            elected_at = time.monotonic()
            first = wait_until(lambda: sends.acked_since(killed_at), "a write accepted after the failover")[0]
            g.start(leader)                        # the old leader comes back and follows
            rec = {"kill": k + 1, "killed": f"g-{leader}", "new_leader": f"g-{new}",
                   "elected_s": round(elected_at - killed_at, 3), "first_write_s": round(first - killed_at, 3),
                   "lag_bytes_at_kill": lag.get(f"g-{new}"), "acked_before": len(acked_before)}
            report["kills"].append(rec)
            log(f"kill {k + 1}: {rec}")
        sends.stop.set()
        t.join(timeout=patience())
        leader = g.wait_all_in_sync()
        bodies = g.read_topic(leader, TOPIC)
        counts = Counter(bodies)
        stored = {int(b[1:]) for b in counts}
        lost = sorted(s for s in sends.acked if s not in stored)
        prev = 0.0
        for rec, at in zip(report["kills"], kill_times):      # each loss to the kill it came before
            n = [s for s in lost if prev < sends.acked[s][1] <= at]
            rec["lost"], rec["lost_bytes"] = len(n), sum(len(TOPIC) + 10 + RECORD_OVERHEAD for _ in n)
            prev = at
        report.update({
            "acked": len(sends.acked), "failed_sends": sends.failed, "send_errors": dict(sends.errors),
            "stored": len(bodies), "lost": len(lost), "lost_seqs": lost[:20],
            "duplicated": sum(1 for c in counts.values() if c > 1),
            "final_leader": f"g-{leader}",
            "logs_equal": len({(g.status(i) or {}).get("log_end") for i in range(3)}) == 1,
        })
        ws = [r["first_write_s"] for r in report["kills"]]
        if ws:
            report["first_write_s"] = {"p50": round(statistics.median(ws), 3), "max": max(ws),
                                       "min": min(ws)}
            report["elected_s"] = {"p50": round(statistics.median(r["elected_s"] for r in report["kills"]), 3),
                                   "max": max(r["elected_s"] for r in report["kills"])}
        return report
    finally:
        sends.stop.set()
        if producer is not None:
            try:
                producer.shutdown()
            except Exception:  # noqa: BLE001 - a client of killed brokers
                pass
        g.kill_all()
