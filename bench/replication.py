"""Produce throughput with SYNC replication to one follower, against the same broker without
replication, measured in the same run.

    .venv/bin/python bench/replication.py            # 5 rounds, <= 200k msgs or 10 s per sample
    .venv/bin/python bench/replication.py --quick    # 1 round of 20k: a smoke run
    .venv/bin/python bench/replication.py --rounds 1 --max-seconds 6 --modes SYNC   # one A/B sample
    .venv/bin/python bench/replication.py ... --member-loop   # the leader's stream on a loop of its own (a probe)

Every sample runs on fresh brokers with fresh stores under bench/.tmp (256 MiB segments),
started and warmed up untimed and stopped afterwards; ``tidemq.client`` ``Producer.send_batches``:
1 KiB bodies, ``--batch`` (256) per request (SendRecords), ``--in-flight`` (4) requests under way,
every result checked OK:

* ``no replication`` (the reference): one ``tidemq serve``, ASYNC_FLUSH (the defaults).
* ``SYNC, 1 follower``: a leader (``--group --role leader``, ``replication_mode = SYNC``,
  ``in_sync_replicas_min = 1``) and one follower (``--leader``) on the same machine: a put is
  answered once the follower has written it (ASYNC_FLUSH on both: in the follower's page cache).
  After the sample the follower must hold every message (its log end equals the leader's).
* ``ASYNC, 1 follower`` (for information): the same, acknowledged after the local write.

The reference is measured right before each variant's sample (paired ratios). On this 2-CPU
machine the follower competes with the leader and the client for the CPUs: the ratio includes that.
"""

from __future__ import annotations

import os
import time

from _broker import BrokerProcess
from _common import Options, Sample, cores_note, paired_rounds, timed_sample
from _report import Report, scratch_dir

from tidemq.client.admin import call

REFERENCE = "no replication"
WARMUP = 1024
SEGMENT = str(256 << 20)


class Single:
    name = REFERENCE

    def __init__(self, workdir: str) -> None:
        self.leader = BrokerProcess(os.path.join(workdir, "single"), os.path.join(workdir, "home"),
                                    env={"TIDEMQ_SEGMENT_SIZE_BYTES": SEGMENT, "TIDEMQ_METRICS_PORT": "0"})
        self.follower = None
        self.pid = self.leader.pid
        self.leader.create_topic("Bench", 8)

    def stop(self) -> None:
        for b in (self.follower, self.leader):
            if b is not None:
                b.stop()


class Group(Single):
    def __init__(self, workdir: str, mode: str, module: str = "tidemq.cli.main", env: dict | None = None,
                 trace: bool = False) -> None:
        """``module``, ``env``: BrokerProcess's, for both members (bench/replication_hops.py); ``trace``:
        bench/_traced_broker.py's timestamps written (that module, or one that runs it)."""
        self.trace = trace or module == "_traced_broker"
        env = {"TIDEMQ_SEGMENT_SIZE_BYTES": SEGMENT, "TIDEMQ_METRICS_PORT": "0", "TIDEMQ_REPLICATION_MODE": mode,
               **(env or {})}
        home = os.path.join(workdir, "home")
        self.leader = BrokerProcess(os.path.join(workdir, "leader"), home,
                                    env=self._env(env, workdir, "leader", module),
                                    args=("--group", "bench", "--role", "leader"), module=module)
        self.pid = self.leader.pid
        self.follower = BrokerProcess(os.path.join(workdir, "follower"), home,
                                      env=self._env(env, workdir, "follower", module),
                                      args=("--group", "bench", "--leader", self.leader.endpoint), module=module)
        deadline = time.monotonic() + 60
        while not self._in_sync():
            if time.monotonic() > deadline:
                raise RuntimeError("the follower did not connect")
            time.sleep(0.05)
        self.leader.create_topic("Bench", 8)

    @staticmethod
    def _trace(workdir: str, member: str) -> dict:
        """Where bench/_traced_broker.py writes a member's events (read only by that module)."""
        return {"BENCH_TRACE_OUT": os.path.join(workdir, f"trace-{member}.json")}

    def _env(self, env: dict, workdir: str, member: str, module: str) -> dict:
        return dict(env, **self._trace(workdir, member)) if self.trace else env

    def _in_sync(self) -> bool:
        rep = call(self.leader.endpoint, "Replication")["replication"]
        return any(f["in_sync"] for f in rep.get("followers", []))

    def log_ends(self) -> tuple[int, int]:
        return tuple(call(b.endpoint, "Replication")["replication"]["log_end"] for b in (self.leader, self.follower))


def produce(sys_, body: bytes, count: int, batch: int, max_seconds: float, in_flight: int) -> dict:
    from tidemq.client import Producer
    sent = 0
    t0 = time.perf_counter()
    with Producer(sys_.leader.endpoint, timeout_s=60, max_in_flight=in_flight) as p:
        while sent < count and time.perf_counter() - t0 < max_seconds:
            n = min(count - sent, batch * in_flight * 8)
            rs = p.send_batches("Bench", [[body] * batch for _ in range(n // batch or 1)])
            bad = rs.failed() if hasattr(rs, "failed") else [r for r in rs if not r.ok]
            if bad:
                raise RuntimeError(f"{sys_.name}: {len(bad)} sends refused: {bad[0]}")
            sent += len(rs)
    return {"messages": sent, "seconds": time.perf_counter() - t0}


def member_module(a) -> str:
    """The group's members' ``python -m`` module: ``--member-loop``'s probe, or tidemq's own."""
    return "_member_loop_broker" if a.member_loop else "tidemq.cli.main"


def sample(make, body: bytes, a) -> dict:
    s = make()
    try:
        produce(s, body, WARMUP, a.batch, 30.0, a.in_flight)
        r = timed_sample(s, produce, s, body, a.count, a.batch, a.max_seconds, a.in_flight)
        if s.follower is not None:
            deadline = time.monotonic() + 120
            while len(set(s.log_ends())) != 1:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{s.name}: the follower did not catch up: {s.log_ends()}")
                time.sleep(0.05)
        return r
    finally:
        s.stop()


class Variant:
    def __init__(self, name: str, mode: str) -> None:
        self.name = name
        self.mode = mode


def main() -> None:
    ap = Options(__doc__, rounds=5, count=200_000, count_help="messages per sample (upper bound)", max_seconds=10.0,
                 quick={"rounds": 1, "count": 20_000}, quick_help="1 round of 20k: a smoke run")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--in-flight", type=int, default=4)
    ap.add_argument("--body-bytes", type=int, default=1024)
    ap.add_argument("--modes", default="SYNC,ASYNC", help="the group's variants measured (SYNC, ASYNC or both)")
    ap.add_argument("--member-loop", action="store_true",
                    help="the group's members run bench/_member_loop_broker.py (the stream on a loop of its own)")
    a = ap.parse_args()
    body = os.urandom(a.body_bytes)
    rep = Report("replication", unit="msgs/s", reference=REFERENCE,
                 reference_doc="one tidemq serve, no replication, ASYNC_FLUSH, measured right before each sample",
                 params={"body_bytes": a.body_bytes, "batch": a.batch, "in_flight": a.in_flight, "rounds": a.rounds,
                         "count_per_sample_max": a.count, "max_seconds_per_sample": a.max_seconds,
                         "segment_bytes": int(SEGMENT), "client": "tidemq.client Producer.send_batches (SendRecords)",
                         "group": "leader + 1 follower on this machine, in_sync_replicas_min 1, ASYNC_FLUSH"})
    variants = [Variant(f"{m}, 1 follower", m) for m in ("SYNC", "ASYNC") if m in a.modes.upper().split(",")]
    for v in variants:
        rep.ratio(v.name, None)
    with scratch_dir("replication") as tmp:
        n = [0]

        def fresh() -> str:
            n[0] += 1
            return os.path.join(tmp, f"s{n[0]}")

        def reference() -> Sample:
            r = sample(lambda: Single(fresh()), body, a)
            rate = r["messages"] / r["seconds"]
            return Sample(rate, {"server_cores": r["server_cores"], "client_cores": r["client_cores"]},
                          f"{REFERENCE} {rate:,.0f} msgs/s")

        def run(v: Variant) -> dict:
            return sample(lambda: Group(fresh(), v.mode, module=member_module(a)), body, a)

        def row(v: Variant, ref: Sample, r: dict) -> Sample:
            rate = r["messages"] / r["seconds"]
            return Sample(rate, {"server_cores": r["server_cores"], "client_cores": r["client_cores"]},
                          f"{v.name} {rate:,.0f} msgs/s ({rate / ref.value:.2f} x)")

        paired_rounds(rep, a.rounds, variants, reference, run, row)
        rep.note(cores_note("sample") + " server_cores counts the leader process only.")
        rep.write(tmp)


if __name__ == "__main__":
    main()
