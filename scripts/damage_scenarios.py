"""Issue 12's damage scenarios, measured: intact messages lost, damaged records served, start time.

    .venv/bin/python scripts/damage_scenarios.py [--messages 30000] [--json] [--broker]
    PYTHONPATH=bench/.tmp/src-<tree> .venv/bin/python scripts/damage_scenarios.py   # an older src/ (before)

Each scenario builds a store of 4 MiB segments holding ``--messages`` messages of ~400 bytes
(4 queues, over four segments), stops it cleanly, damages its files by hand as named (64 bytes
flipped in the middle of a segment, a zeroed stretch, a segment truncated to half, a torn last
record), leaves the files as a crash would (an ``abort`` file; the checkpoint kept, emptied or
random bytes), starts it again (timed) and reads every queue back through ``get``. Counted:
intact messages (records the damage did not touch) not served exactly once as sent, and records
served that are not exactly as sent. Uses only MessageStore's public calls, so it runs against
any version of src/. ``--broker``: a real broker (``tidemq serve``) starts on the damaged store
instead (timed until it prints "ready"), and every queue is read back through PullMessage.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from tidemq.store import Message, MessageStore, StoreConfig
from tidemq.testing.crash import crash_files

SEG = 4 << 20
# the log must reach past the damage in segment 2, with intact records after it
NEEDED_LOG_BYTES = 2 * SEG + SEG // 3 + (64 << 10) + (256 << 10)
TOPIC = "Dmg"
QUEUES = 4


def body_of(i: int) -> bytes:
    return b"%06d|" % i + random.Random(i).randbytes(400)


def config(root: str) -> StoreConfig:
    return StoreConfig(root_dir=root, segment_size_bytes=SEG, index_slots=1000, index_entries=4000,
                       topic_queues_default=QUEUES, auto_create_topics=True)


def build(root: str, n: int) -> dict[int, tuple[int, int, int, int]]:
    """i -> (commit-log offset, size, queue id, queue offset)."""
    s = MessageStore(config(root)).start()
    try:
        out = {}
        for k in range(0, n, 1000):
            rs = s.put_batch([Message(TOPIC, body_of(i)) for i in range(k, min(n, k + 1000))])
            for j, r in enumerate(rs):
                assert r.ok, r
                out[k + j] = (r.commitlog_offset, r.size, r.queue_id, r.queue_offset)
        return out
    finally:
        s.shutdown()


def seg_file(root: str, k: int) -> str:
    return os.path.join(root, "commitlog", "%020d" % (k * SEG))


def write_at(root: str, offset: int, data_fn) -> tuple[int, int]:
    with open(seg_file(root, offset // SEG), "r+b") as f:
        f.seek(offset % SEG)
        old = f.read(data_fn.length)
        f.seek(offset % SEG)
        f.write(data_fn(old))
    return offset, offset + data_fn.length


def flip(n):
    def fn(old):
        return bytes(b ^ 0xFF for b in old)
    fn.length = n
    return fn


def zeroes(n):
    def fn(old):
        return bytes(len(old))
    fn.length = n
    return fn


def scenario_damage(name: str, root: str, recs: dict) -> tuple[int, int]:
    """Damage the files for scenario ``name``; returns the commit-log range hit."""
    last_i = max(recs, key=lambda i: recs[i][0])
    if name.startswith("flip-mid-segment"):
        k = int(name[-1])
        return write_at(root, k * SEG + SEG // 2, flip(64))
    if name == "flip-last-segment-before-intact":
        p, _n, _q, _o = recs[last_i - 20]
        return write_at(root, p + 50, flip(64))
    if name == "zeroes-64KiB-mid-segment2":
        return write_at(root, 2 * SEG + SEG // 3, zeroes(64 << 10))
    if name == "truncated-segment1":
        with open(seg_file(root, 1), "r+b") as f:
            f.truncate(SEG // 2)
        return SEG + SEG // 2, 2 * SEG
    if name == "torn-tail":
        p, n, _q, _o = recs[last_i]
        return write_at(root, p + n // 2, zeroes(n - n // 2))
    raise ValueError(name)


def read_back(s: MessageStore) -> list:
    out = []
    for q in range(QUEUES):
        off, hi = s.min_offset(TOPIC, q), s.max_offset(TOPIC, q)
        while off < hi:
            g = s.get("g", TOPIC, q, off, max_count=32)
            out += g.messages
            if g.next_offset <= off:
                break                       # stuck: what follows is unreachable
            off = g.next_offset
    return out


def broker_read_back(root: str) -> tuple[float, list]:
    """Start ``tidemq serve`` on ``root``: (seconds until ready, every message read back through
    PullMessage as (body, queue id, queue offset))."""
    from tidemq.client import PullConsumer
    from tidemq.protocol.stubs import Code
    env = {**os.environ, "TIDEMQ_SEGMENT_SIZE_BYTES": str(SEG), "TIDEMQ_INDEX_SLOTS": "1000",
           "TIDEMQ_INDEX_ENTRIES": "4000", "TIDEMQ_METRICS_PORT": "0",
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "tidemq.cli.main", "serve", "--root", root, "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        line = proc.stdout.readline()
        start_s = time.perf_counter() - t0
        if "ready on " not in line:
            raise RuntimeError(f"broker did not start: {line!r}")
        endpoint = line.split("ready on ")[1].split()[0]
        out = []
        with PullConsumer(endpoint, timeout_s=60) as c:
            for q in range(QUEUES):
                off = 0
                while True:
                    r = c.pull(TOPIC, q, off, batch_size=32)
                    out += [(m.body, q, m.system_properties.queue_offset) for m in r.messages]
                    if r.next_offset <= off:
                        break                       # the queue's end (or stuck)
                    off = r.next_offset
                    if r.code != Code.OK and r.code != Code.MESSAGE_NOT_FOUND:
                        break
        return start_s, out
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


SCENARIOS = [
    # (damage, abort file, checkpoint)
    ("flip-mid-segment0", True, "empty"),
    ("flip-mid-segment0", True, "random"),
    ("flip-mid-segment0", True, "valid"),
    ("flip-mid-segment1", True, "valid"),
    ("flip-mid-segment1", False, "valid"),
    ("flip-mid-segment1", True, "random"),
    ("flip-last-segment-before-intact", True, "empty"),
    ("zeroes-64KiB-mid-segment2", True, "random"),
    ("truncated-segment1", True, "empty"),
    ("torn-tail", True, "empty"),
]


def count_served(recs: dict, hit: set, got: list) -> dict:
    """intact_lost / damaged_served of what a read back returned: (body, queue id, queue offset)."""
    by_body = {body_of(i): i for i in recs}
    served: dict[int, int] = {}
    bad = 0
    for body, qid, qoff in got:
        i = by_body.get(body)
        if i is None or (qid, qoff) != recs[i][2:]:
            bad += 1
            continue
        served[i] = served.get(i, 0) + 1
    lost = sum(1 for i in recs if i not in hit and served.get(i) != 1)
    return {"intact_lost": lost, "damaged_served": bad + sum(1 for i in hit if i in served)}


def run(n: int, broker: bool = False) -> list[dict]:
    rows = []
    base = tempfile.mkdtemp(prefix="tidemq-damage-")
    try:
        pristine = os.path.join(base, "pristine")
        recs = build(pristine, n)
        end = max(p + sz for p, sz, _q, _o in recs.values())
        if end <= NEEDED_LOG_BYTES:         # the scenarios damage segments 0-2, the intact records after them
            raise SystemExit(f"--messages {n} fill {end / (1 << 20):.1f} MiB of commit log; the scenarios need "
                             f"more than {NEEDED_LOG_BYTES / (1 << 20):.1f} MiB: use --messages "
                             f"{n * NEEDED_LOG_BYTES // end + 1000} or more")
        for damage, abort, checkpoint in SCENARIOS:
            root = os.path.join(base, "s")
            shutil.rmtree(root, ignore_errors=True)
            shutil.copytree(pristine, root)
            lo, hi = scenario_damage(damage, root, recs)
            crash_files(root, abort, checkpoint)
            hit = {i for i, (p, sz, _q, _o) in recs.items() if p < hi and lo < p + sz}
            t0 = time.perf_counter()
            row = {"damage": damage, "abort": abort, "checkpoint": checkpoint, "records_hit": len(hit)}
            if broker:
                try:
                    row["start_s"], got = broker_read_back(root)
                except Exception as e:  # noqa: BLE001 - a refusal to start is an outcome too
                    row.update(start_s=round(time.perf_counter() - t0, 3), start_error=repr(e)[:200])
                    rows.append(row)
                    continue
                row["start_s"] = round(row["start_s"], 3)
                row.update(count_served(recs, hit, got))
                rows.append(row)
                continue
            try:
                s = MessageStore(config(root)).start()
            except Exception as e:  # noqa: BLE001 - a refusal to start is an outcome too
                row.update(start_s=round(time.perf_counter() - t0, 3), start_error=repr(e)[:200])
                rows.append(row)
                continue
            row["start_s"] = round(time.perf_counter() - t0, 3)
            try:
                row.update(count_served(recs, hit, [(m.body, m.queue_id, m.queue_offset) for m in read_back(s)
                                                    if m.topic == TOPIC]))
                row.update(segments_after=len(s.segments), recovery=s.recovery.summary()[:300])
                st = s.stats()
                if "records_damaged" in st:
                    row["records_damaged_counted"] = st["records_damaged"]
            finally:
                s.shutdown()
            rows.append(row)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=30_000)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--broker", action="store_true", help="start a real broker, read back through PullMessage")
    a = ap.parse_args()
    rows = run(a.messages, a.broker)
    if a.json:
        print(json.dumps(rows, indent=1))
        return
    print("| damage | abort | checkpoint | records hit | intact lost | damaged served | damaged reads counted | "
          "start s | segments after |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['damage']} | {r['abort']} | {r['checkpoint']} | {r['records_hit']} | {r.get('intact_lost', '-')} | "
              f"{r.get('damaged_served', '-')} | {r.get('records_damaged_counted', '-')} | {r['start_s']} | "
              f"{r.get('segments_after', r.get('start_error', '-'))} |")


if __name__ == "__main__":
    main()
