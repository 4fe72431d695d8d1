"""The cost of a SQL92 property filter per message, against tag filtering, in the same run.

    .venv/bin/python bench/filter_read.py                  # 200k messages, 5 rounds
    .venv/bin/python bench/filter_read.py --quick          # 50k messages, 2 rounds

Set-up: messages of 256 bytes into topic "Bench" (8 queues), each with a tag (paid / new, half
each) and user properties ``region`` (eu / us / apac / latam) and ``amount`` (0..990) plus four
more properties a filter does not name (a realistic property section: ~10 properties with the
system ones). Every queue is then read from offset 0 to its end with ``MessageStore.get``
(max_count=32, following next_offset): what ReceiveMessage and PullMessage do per message.

Reference ("tags"): ``get(tags=["paid"])``: the consume queue's tag hash, then the tag compared on
the decoded message (half the messages delivered). Variants, each measured right after its own
reference sample:
- ``sql TAGS = 'paid'``: the same selection by a SQL92 filter (a TAGS conjunct is also handed to
  the tag-hash check: filters.py, so this is the tag filter plus one evaluation per delivered message);
- ``sql TAGS <> 'new'``: the same selection that no tag hash can help: every record read and
  evaluated (TAGS read from the stored property bytes);
- ``sql region/amount``: ``region IN ('eu','us') AND amount > 490 AND amount IS NOT NULL``
  (about a quarter delivered), three comparisons over two properties;
- ``no filter``: every message (what either filter costs over reading it).
The rate is messages scanned per second (every message of the queue, delivered or passed); the
ratio is variant / tags. Per-message cost = 1 / rate.
"""

from __future__ import annotations

import os
import time
from typing import NamedTuple

from _common import Options, Sample, only, paired_rounds
from _report import Report, progress, scratch_dir, settle
from _store import QUEUES, TOPIC, store_config

from tidemq.broker.consume.filters import subscription
from tidemq.config import MIB
from tidemq.protocol.stubs import pb
from tidemq.store import GetStatus, Message, MessageStore

BODY_BYTES = 256


class Variant(NamedTuple):
    name: str
    tags: list | None
    sql: str | None


TAGS = Variant("tags", ["paid"], None)
VARIANTS = [
    Variant("sql TAGS = 'paid'", None, "TAGS = 'paid'"),
    Variant("sql TAGS <> 'new'", None, "TAGS <> 'new'"),
    Variant("sql region/amount", None, "region IN ('eu','us') AND amount > 490 AND amount IS NOT NULL"),
    Variant("no filter", None, None),
]


def fill(store: MessageStore, count: int) -> None:
    body = b"x" * BODY_BYTES
    regions = ("eu", "us", "apac", "latam")
    done = 0
    while done < count:
        k = min(1024, count - done)
        batch = [Message(topic=TOPIC, body=body, tags="paid" if (done + i) % 2 else "new",
                         properties={"region": regions[(done + i) % 4], "amount": str(((done + i) * 7) % 100 * 10),
                                     "customer": f"c{(done + i) % 1000}", "channel": "web", "currency": "EUR",
                                     "trace": f"t-{done + i}"})
                 for i in range(k)]
        store.put_batch(batch)
        done += k


def scan_all(store: MessageStore, v: Variant, max_s: float) -> tuple[int, int]:
    """(messages scanned, messages delivered) reading every queue from offset 0 to its end."""
    if v.sql:            # as ReceiveMessage / PullMessage make it (broker/consume/filters.py)
        sub, _ = subscription(pb.FilterExpression(type=pb.FilterType.SQL, expression=v.sql))
        tags, match = sub.tags, sub.match
    else:
        tags, match = v.tags, None
    scanned = delivered = 0
    end = time.perf_counter() + max_s
    for q in range(QUEUES):
        off = 0
        top = store.max_offset(TOPIC, q)
        while off < top:
            g = store.get("bench", TOPIC, q, off, max_count=32, tags=tags, match=match)
            if g.status is GetStatus.FOUND:
                delivered += len(g.messages)
            if g.next_offset <= off:
                break
            scanned += g.next_offset - off
            off = g.next_offset
            if time.perf_counter() >= end:
                return scanned, delivered
    return scanned, delivered


def main() -> None:
    ap = Options(__doc__, rounds=5, count=200_000, count_help="messages written, then scanned", max_seconds=30.0,
                 quick={"count": 50_000, "rounds": 2}, quick_help="50k messages, 2 rounds").store_options()
    a = ap.parse_args()
    variants = only(VARIANTS, a.only)
    rep = Report("filter_read", unit="msgs/s", reference="tags",
                 reference_doc="MessageStore.get(tags=['paid'], max_count=32) over every queue: tag hash in the "
                               "consume queue, then the tag of the decoded message (half delivered)",
                 params={"messages": a.count, "body_bytes": BODY_BYTES, "queues": QUEUES, "rounds": a.rounds,
                         "user_properties": 6, "max_seconds_per_sample": a.max_seconds})
    for v in variants:
        rep.ratio(v.name, None)
    with scratch_dir("filter_read") as tmp:
        store = MessageStore(store_config(os.path.join(tmp, "store"), 256 * MIB)).start()

        def timed(v: Variant):
            c0, t0 = time.thread_time(), time.perf_counter()
            scanned, delivered = scan_all(store, v, a.max_seconds)
            dt = time.perf_counter() - t0
            return scanned, delivered, dt, (time.thread_time() - c0) / dt

        def reference() -> Sample:
            n, d, dt, cpu = timed(TAGS)
            return Sample(n / dt, {"delivered": d, "cpu_share": cpu}, f"tags {n / dt:,.0f} msgs/s")

        def row(v: Variant, ref: Sample, res) -> Sample:
            n, d, dt, cpu = res
            if n != a.count and dt < a.max_seconds:
                raise RuntimeError(f"scanned {n} messages, {a.count} were written")
            return Sample(n / dt, {"delivered": d, "us_per_msg": dt / n * 1e6, "cpu_share": cpu},
                          f"{v.name} {n / dt:,.0f} msgs/s ({dt / n * 1e6:.2f} us/msg): {n / dt / ref.value:.3f} x")

        try:
            store.create_topic(TOPIC, QUEUES)
            t0 = time.perf_counter()
            fill(store, a.count)
            progress(f"wrote {a.count:,} messages in {time.perf_counter() - t0:.1f}s")
            scan_all(store, VARIANTS[-1], 10.0)          # warm-up
            settle(1.0)
            paired_rounds(rep, a.rounds, variants, reference, timed, row)
        finally:
            store.shutdown()
        rep.note("The tag reference is measured right before every variant sample; ratio = median over rounds "
                 "of variant / the tag sample next to it. Rates count every message scanned, delivered or passed.")
        rep.note("Measured on a 2-CPU machine shared with other engineers' work: the absolute rates are noisy, "
                 "the paired ratios much less.")
        rep.write(tmp)


if __name__ == "__main__":
    main()
