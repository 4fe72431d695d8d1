"""A seeded simulation of the store over FaultyFileIO, checked against a plain model.

One run = one seed: a random sequence of put / put_batch / get / flush / restart /
crash (kill -9) / power loss / injected crash at the n-th file operation /
injected write errors on consume queues and the log / failed fsyncs of the log, the
consume queues and the index (FaultyFileIO drops or keeps the pages a failed fsync
covered, as Linux does) / a lost ``consumequeue/`` directory; with one or two
commit-log directories (a failed one is left for the other).
After every restart the surviving log must be:

* exactly-once: no message twice;
* in order: commit-log order is the order the puts were made;
* a prefix: no message is missing before one that survived;
* complete where promised: every message acknowledged under SYNC_FLUSH, every
  message flushed under ASYNC_FLUSH, and after a kill -9 (the page cache
  survives) every message whose put returned, except what a failure of the log
  took (store/log_failure.py: under ASYNC_FLUSH the cut takes back acknowledged
  messages after the durable end, as a crash would);
* honest about fsync errors: no message answered PUT_OK under SYNC_FLUSH lies in
  what a log failure covered (acknowledged after an fsync error it depended on:
  the run fails at once), and no message answered FLUSH_FAILED is ever found;
* intact: topic, queue, tags, keys and body bytes as put;
* readable through every queue, with contiguous queue offsets.

Every change of a segment's state the run makes is recorded (``transitions``: (from, to) ->
count, through segment_state.listeners) and checked against segment_state.TRANSITIONS.

``python -m tests.sim.store_sim SEED [--async]`` replays one seed with logging.
"""

from __future__ import annotations

import errno
import logging
import random
import sys
from collections import Counter
from dataclasses import dataclass, field

from tidemq.store import GetStatus, Message, MessageStore, PutStatus, StoreConfig
from tidemq.store import PutReason, segment_state
from tidemq.store.log_failure import LogFailed
from tidemq.testing.faulty_io import FaultyFileIO, SimulatedCrash

ROOT = "/sim/store"
TOPICS = {"SimA": 3, "SimB": 2}


def sim_config(sync: bool, two_dirs: bool = False) -> StoreConfig:
    return StoreConfig(
        root_dir=ROOT, auto_create_topics=True, segment_size_bytes=16 * 1024, preallocate_next_segment=False,
        commitlog_dirs=(f"{ROOT}/commitlog", f"{ROOT}/commitlog2") if two_dirs else (),
        consume_queue_units_per_segment=32, index_slots=64, index_entries=256,
        flush_disk_type="SYNC_FLUSH" if sync else "ASYNC_FLUSH",
        flush_interval_ms=60_000, flush_thorough_interval_ms=600_000,
        flush_consume_queue_interval_ms=60_000, checkpoint_interval_ms=60_000,
        sync_flush_timeout_ms=5_000, topic_queues_default=2, dispatch_write_retries_max=2,
    )


@dataclass
class Sent:
    id: int
    topic: str
    queue_id: int | None
    tags: str | None
    keys: list[str]
    body: bytes
    phys: int = -1             # commit-log offset once known
    end: int = -1              # end of its record
    queue_offset: int = -1


@dataclass
class Model:
    sent: dict[int, Sent] = field(default_factory=dict)
    log: list[int] = field(default_factory=list)          # ids surviving, in log order (last restart)
    returned: list[int] = field(default_factory=list)     # ids appended since (put returned a position)
    must_survive_power: set[int] = field(default_factory=set)   # durable (acked SYNC / flushed)
    uncertain: set[int] = field(default_factory=set)    # the process died inside their put
    flush_failed: set[int] = field(default_factory=set)     # answered FLUSH_FAILED: never to be found
    next_id: int = 0
    # figures of the run (tests/sim: scenario counts)
    acked: int = 0                   # answered PUT_OK
    acked_then_taken: int = 0        # ASYNC_FLUSH: answered PUT_OK, then taken by a log failure's cut
    answered_flush_failed: int = 0
    log_failures: int = 0
    served: int = 0                  # messages a get served
    served_before_durable: int = 0   # SYNC_FLUSH: served before their fsync (the run fails at once)


class SimFailure(AssertionError):
    pass


def m_failed(m: Model) -> set[int]:
    return m.flush_failed


class StoreSim:
    def __init__(self, seed: int, sync: bool, steps: int = 60) -> None:
        self.seed = seed
        self.sync = sync
        self.steps = steps
        self.rng = random.Random(seed)
        self.fio = FaultyFileIO(seed=seed)
        self.two_dirs = self.rng.random() < 0.5
        self.cfg = sim_config(sync, self.two_dirs)
        self.model = Model()
        self.store: MessageStore | None = None
        self.trace: list[str] = []
        self.restarts = 0
        self._failures_seen = 0          # store.commit_log.failures already accounted (note_failures)
        self.transitions: Counter = Counter()      # (from state, to state) -> how many segments made it
        self.illegal: list[str] = []

    def _saw(self, segment, frm, to) -> None:
        self.transitions[(frm, to)] += 1
        if not segment_state.legal(frm, to):
            self.illegal.append(f"{segment.path}: {frm.value} -> {to.value}")

    # Helpers -------------------------------------------------------------------------
    def fail(self, what: str) -> None:
        raise SimFailure(f"seed {self.seed} ({'SYNC' if self.sync else 'ASYNC'}): {what}\n"
                         f"replay: python -m tests.sim.store_sim {self.seed}{'' if self.sync else ' --async'}\n"
                         f"last steps: {self.trace[-12:]}")

    def new_message(self) -> Sent:
        m = self.model
        i = m.next_id
        m.next_id += 1
        topic = self.rng.choice(sorted(TOPICS))
        qid = self.rng.choice([None, None, self.rng.randrange(TOPICS[topic])])
        tags = self.rng.choice([None, "a", "b"])
        keys = [f"k{i}"] if self.rng.random() < 0.3 else []
        body = b"%d|" % i + self.rng.randbytes(self.rng.choice([0, 10, 100, 900, 3000]))
        s = Sent(i, topic, qid, tags, keys, body)
        m.sent[i] = s
        return s

    def start(self) -> None:
        self.store = MessageStore(self.cfg, fio=self.fio)
        self.store.start()
        for t, n in TOPICS.items():
            self.store.create_topic(t, n)

    # Operations ----------------------------------------------------------------------
    def op_put(self, n: int) -> None:
        msgs = [self.new_message() for _ in range(n)]
        try:
            rs = self.store.put_batch([Message(topic=s.topic, body=s.body, tags=s.tags, keys=s.keys,
                                               queue_id=s.queue_id) for s in msgs])
        except SimulatedCrash:
            self.model.uncertain.update(s.id for s in msgs)   # the process died inside the put
            raise
        for s, r in zip(msgs, rs):
            if r.status in (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT):
                s.phys, s.queue_offset, s.queue_id = r.commitlog_offset, r.queue_offset, r.queue_id
                s.end = r.commitlog_offset + r.size
                self.model.returned.append(s.id)
                if r.status is PutStatus.PUT_OK:
                    self.model.acked += 1
                    if self.store.commit_log.failed_for(s.end) is not None:
                        self.fail(f"message {s.id} answered PUT_OK although a log failure covers it")
                if self.sync and r.status is PutStatus.PUT_OK:
                    self.model.must_survive_power.add(s.id)
            elif r.status is PutStatus.FLUSH_DISK_FAILED:
                s.end = r.commitlog_offset + r.size
                self.model.flush_failed.add(s.id)
                self.model.answered_flush_failed += 1
                if self.store.commit_log.failed_for(s.end) is None or self.store.confirm(s.end) is not PutReason.FLUSH_FAILED:
                    self.fail(f"message {s.id} answered FLUSH_FAILED but no failure covers it")
            elif r.status not in (PutStatus.SERVICE_NOT_AVAILABLE, PutStatus.CREATE_MAPPED_FILE_FAILED):
                self.fail(f"unexpected put status {r.status} ({r.error}) for message {s.id}")

    def op_flush(self) -> None:
        try:
            flushed = self.store.commit_log.flush()
        except LogFailed:
            flushed = self.store.commit_log.flushed_offset
        self.note_failures()
        self.store.flush_queues()
        for i in self.model.returned:
            s = self.model.sent[i]
            if s.end <= flushed:
                self.model.must_survive_power.add(i)

    def op_get(self) -> None:
        topic = self.rng.choice(sorted(TOPICS))
        qid = self.rng.randrange(TOPICS[topic])
        lo, hi = self.store.min_offset(topic, qid), self.store.readable_max_offset(topic, qid)
        off = self.rng.randint(lo, hi)
        g = self.store.get("sim", topic, qid, off, max_count=8)
        durable = self.store.commit_log.flushed_offset
        for msg in g.messages:
            self.model.served += 1
            if self.sync and msg.commitlog_offset + msg.store_size > durable:
                self.model.served_before_durable += 1
                self.fail(f"get served message at {msg.commitlog_offset} before it was durable ({durable})")
        if off == hi:
            if g.status not in (GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.NO_MESSAGE_IN_QUEUE):
                self.fail(f"get at max offset {off} of {topic}/{qid}: {g}")
            return
        if g.status is not GetStatus.FOUND:
            self.fail(f"get {topic}/{qid}@{off} in [{lo},{hi}): {g}")
        for k, msg in enumerate(g.messages):
            if msg.queue_offset != off + k:
                self.fail(f"get {topic}/{qid}@{off}: message {k} has queue offset {msg.queue_offset}")
            self.check_message(msg)

    def note_failures(self) -> None:
        """What the log failures of this run took: ASYNC acknowledgements taken back (allowed, as a
        crash takes them), never a SYNC one (the run fails)."""
        st = self.store
        if st is None or getattr(st, "commit_log", None) is None:
            return
        fs = st.commit_log.failures
        for f in fs[self._failures_seen:]:
            self.model.log_failures += 1
            self.trace.append(f"log failed: durable {f.durable_end}, resume {f.resume_offset}")
            m = self.model
            for i in list(m.returned):
                if f.covers(m.sent[i].end):
                    if i in m.must_survive_power:
                        self.fail(f"message {i}, acknowledged durable, lies in what a log failure took "
                                  f"({f.durable_end}..{f.resume_offset})")
                    m.returned.remove(i)
                    m.acked_then_taken += 1
                    if f.resume_offset is None:     # no seal recorded: a kill -9 may find it again
                        m.uncertain.add(i)
        self._failures_seen = len(fs)

    def check_message(self, msg) -> int:
        i = int(bytes(msg.body).split(b"|", 1)[0])
        s = self.model.sent.get(i)
        if s is None:
            self.fail(f"unknown message id {i}")
        if (msg.topic, msg.body, msg.tags, msg.keys) != (s.topic, s.body, s.tags, s.keys):
            self.fail(f"message {i} differs from what was put: {msg!r}")
        if s.queue_id is not None and msg.queue_id != s.queue_id:
            self.fail(f"message {i} in queue {msg.queue_id}, put to {s.queue_id}")
        return i

    # Crashes and restarts --------------------------------------------------------------
    def restart(self, how: str) -> None:
        m = self.model
        if how == "clean":
            try:
                self.store.shutdown()
            except SimulatedCrash:
                how = "crash"
        if how != "clean":
            self.store.kill()
        self.note_failures()            # (shutdown's flush may have failed)
        cl = getattr(self.store, "commit_log", None)
        if cl is not None and cl.frozen:
            # a failed fsync whose cut did not happen (the process died in it): what it covered may
            # be gone even from the page cache (dropped pages), or found again (no seal recorded)
            for i in list(m.returned):
                if m.sent[i].end > cl.flushed_offset:
                    if i in m.must_survive_power:
                        self.fail(f"message {i}, acknowledged durable, lies after the durable end "
                                  f"{cl.flushed_offset} of a failed fsync")
                    m.returned.remove(i)
                    m.uncertain.add(i)
        if how == "power":
            self.fio = self.fio.after_power_loss(self.rng)
            required = m.must_survive_power
        elif how == "crash":
            self.fio = self.fio.after_crash()
            required = m.must_survive_power | set(m.returned)
        else:
            required = m.must_survive_power | set(m.returned)
        if how != "clean" and self.rng.random() < 0.1:
            self.fio.remove_tree(self.cfg.consumequeue_path)
            self.trace.append("lost consumequeue/")
        self.fio.clear_faults()
        self.fio.capacity_bytes = 1 << 40
        self.restarts += 1
        self.start()
        self._failures_seen = 0
        self.verify_all(required, set(m.log) | set(m.returned) | m.uncertain)

    def verify_all(self, required: set[int], candidates: set[int]) -> None:
        st = self.store
        rep = st.check()
        if not rep.ok:
            self.fail(f"check() after restart: {rep.problems[:5]}")
        found: list[tuple[int, int]] = []
        for topic, n in TOPICS.items():
            for q in range(n):
                off, hi = st.min_offset(topic, q), st.max_offset(topic, q)
                while off < hi:
                    g = st.get("sim", topic, q, off, max_count=32)
                    if g.status is not GetStatus.FOUND:
                        self.fail(f"{topic}/{q}@{off} of [{st.min_offset(topic, q)},{hi}): {g}")
                    for msg in g.messages:
                        if msg.queue_offset != off:
                            self.fail(f"{topic}/{q}: expected queue offset {off}, got {msg.queue_offset}")
                        found.append((msg.commitlog_offset, self.check_message(msg)))
                        off += 1
        found.sort()
        ids = [i for _, i in found]
        if len(set(ids)) != len(ids):
            self.fail("a message is present twice")
        if ids != sorted(ids):
            self.fail("messages are out of put order in the log")
        present = set(ids)
        missing = required - present
        if missing:
            self.fail(f"acknowledged / durable messages lost: {sorted(missing)[:10]}")
        extra = present - candidates
        if extra:
            self.fail(f"messages that were never appended appeared: {sorted(extra)[:10]}")
        back = present & m_failed(self.model)
        if back:
            self.fail(f"messages answered FLUSH_FAILED were found after a restart: {sorted(back)[:10]}")
        if ids:   # a prefix: nothing appended before the last survivor is missing
            last = ids[-1]
            holes = [i for i in candidates if i < last and i not in present
                     and self.model.sent[i].phys >= 0 and i in set(self.model.returned) | set(self.model.log)]
            if holes:
                self.fail(f"holes before the last surviving message: {sorted(holes)[:10]}")
        m = self.model
        m.log = ids
        m.returned = []
        m.uncertain = set()
        m.must_survive_power = set(ids)
        for phys, i in found:
            m.sent[i].phys = phys

    # The run ---------------------------------------------------------------------------
    def run(self) -> "StoreSim":
        segment_state.listeners.append(self._saw)
        try:
            self.start()
            try:
                for step in range(self.steps):
                    self.step(step)
                self.restart("clean")
            finally:
                if self.store is not None:
                    try:
                        self.store.kill()
                    except BaseException:  # noqa: BLE001 - teardown of a dead store
                        pass
        finally:
            segment_state.listeners.remove(self._saw)
        if self.illegal:
            self.fail(f"segment transitions outside segment_state.TRANSITIONS: {self.illegal[:5]}")
        return self

    def step(self, step: int) -> None:
        r = self.rng.random()
        try:
            if r < 0.35:
                self.trace.append(f"{step}:put")
                self.op_put(1)
            elif r < 0.6:
                n = self.rng.randint(2, 20)
                self.trace.append(f"{step}:put_batch({n})")
                self.op_put(n)
            elif r < 0.72:
                self.trace.append(f"{step}:get")
                self.op_get()
            elif r < 0.8:
                self.trace.append(f"{step}:flush")
                self.op_flush()
            elif r < 0.84:
                n = self.rng.randint(1, 40)
                torn = self.rng.choice([0, 100, 2000])        # a pwrite the crash stops lands in part
                self.trace.append(f"{step}:crash_after({n}, torn={torn})")
                self.fio.crash_after(n, torn_bytes=torn)
            elif r < 0.855:
                k = self.rng.randint(1, 5)
                self.trace.append(f"{step}:eio_cq({k})")
                self.fio.fail("pwrite", errno.EIO, "consumequeue", times=k)
            elif r < 0.87:
                err = self.rng.choice([errno.EIO, errno.ENOSPC])
                written = self.rng.choice([0, 200, 5000])     # what reached the file before the error
                self.trace.append(f"{step}:{errno.errorcode[err]}_log(written={written})")
                self.fio.fail("pwrite", err, "commitlog", written=written)
            elif r < 0.885:
                self.trace.append(f"{step}:fsync_fails(commitlog)")
                self.fio.fail("fsync", errno.EIO, "commitlog")
            elif r < 0.895:
                where = self.rng.choice(["consumequeue", "index"])
                self.trace.append(f"{step}:fsync_fails({where})")
                self.fio.fail("fsync", errno.EIO, where)
            elif r < 0.905:
                self.trace.append(f"{step}:heal")
                self.store.flush_queues()
            elif r < 0.915:
                room = self.rng.choice([0, 500, 5000, 20000])
                self.trace.append(f"{step}:disk_full(+{room})")
                self.fio.capacity_bytes = self.fio.disk_usage("/").used_bytes + room
                self.store.check_disk()
            elif r < 0.92:
                self.trace.append(f"{step}:disk_freed")
                self.fio.capacity_bytes = 1 << 40
                self.store.check_disk()
                self.store.flush_queues()
            elif r < 0.925:
                self.trace.append(f"{step}:restart")
                self.restart("clean")
            elif r < 0.965:
                self.trace.append(f"{step}:kill-9")
                self.restart("crash")
            else:
                self.trace.append(f"{step}:power-loss")
                self.restart("power")
            self.note_failures()
        except SimulatedCrash:
            self.trace.append(f"{step}:crashed")
            self.restart(self.rng.choice(["crash", "power"]))


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO)
    seed = int(argv[0])
    sim = StoreSim(seed, sync="--async" not in argv).run()
    m = sim.model
    print(f"seed {seed}: ok, {m.next_id} messages, {sim.restarts} restarts, {m.acked} acknowledged, "
          f"{m.answered_flush_failed} answered FLUSH_FAILED, {m.log_failures} log failure(s), "
          f"{m.acked_then_taken} acknowledged (ASYNC) then taken by a failure, {m.served} served")
    print("\n".join(sim.trace))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
