"""What serving consumers only what is durable costs them under SYNC_FLUSH (issue 27.2): the
latency from a send to a long-polling consumer's receipt, reads limited against not limited.

    .venv/bin/python bench/consume_latency.py              # 5 rounds, 300 messages per sample
    .venv/bin/python bench/consume_latency.py --quick      # 2 rounds, 100 messages

Every sample: a fresh broker subprocess (``tidemq serve``, SYNC_FLUSH, topic ``Lat`` of one
queue), tidemq.client. A producer sends one message at a time (``send_batch`` of one 1 KiB body:
answered once its fsync ended), noting when it began and when the answer came; a consumer thread
long-polls PullRecords at the queue's end (``pull_records(..., wait_s=5)``) and notes when each
message arrived. Reported per sample: the median (and p90) of send -> receipt in microseconds; for
information send -> answer, and how many messages a consumer received before their send was
answered (``early``: with reads limited, a message can still arrive a moment before its answer, as
both follow the same fsync; what may never happen is a message served before its fsync ended,
which tests/broker/consume/test_pull.py proves without time).

Reference ("unlimited"): the same against a broker whose reads are not limited to the durable
offset (bench/_unlimited_broker.py: the behaviour before issue 27.2, when a consumer could be served
what the fsync in progress could still lose), measured right before each limited sample. Ratio =
limited / unlimited median latency: above 1 is the latency the limit adds (a slower consumer, here,
not a faster one). No goal: reported.
"""

from __future__ import annotations

import os
import statistics
import threading
import time

from _broker import BrokerProcess
from _common import Options, Sample, paired_rounds
from _report import Report, percentile, progress, scratch_dir, settle

from tidemq.client import Producer, PullConsumer

TOPIC = "Lat"
BODY_BYTES = 1024
ENV = {"TIDEMQ_FLUSH_DISK_TYPE": "SYNC_FLUSH", "TIDEMQ_SEGMENT_SIZE_BYTES": str(64 << 20),
       "TIDEMQ_INDEX_SLOTS": "1000", "TIDEMQ_INDEX_ENTRIES": "20000", "TIDEMQ_SYNC_FLUSH_TIMEOUT_MS": "60000"}


class Variant:
    def __init__(self, name: str, module: str) -> None:
        self.name = name
        self.module = module


LIMITED = Variant("limited (reads stop at the flushed offset)", "tidemq.cli.main")
UNLIMITED = Variant("unlimited", "_unlimited_broker")


def run_sample(tmp: str, module: str, count: int, max_s: float) -> dict:
    """One broker, ``count`` sends (or until ``max_s``): the latencies in microseconds."""
    root, home = os.path.join(tmp, "store"), os.path.join(tmp, "home")
    settle()
    sent: dict[int, int] = {}
    answered: dict[int, int] = {}
    got: dict[int, int] = {}
    done = threading.Event()
    with BrokerProcess(root, home, env=ENV, module=module) as b:
        b.create_topic(TOPIC, 1)

        def consume() -> None:
            with PullConsumer(b.endpoint) as c:
                off = 0
                while not done.is_set() or any(i not in got for i in sent):
                    r = c.pull_records(TOPIC, 0, off, max_count=256, wait_s=0.5 if done.is_set() else 5.0)
                    now = time.perf_counter_ns()
                    if r.found:
                        for m in r.messages():
                            got[int(bytes(m.body[:10]))] = now
                        off = r.next_offset
                    elif done.is_set() and r.next_offset <= off:
                        break

        consumer = threading.Thread(target=consume, daemon=True)
        consumer.start()
        pad = b"x" * (BODY_BYTES - 10)
        deadline = time.perf_counter() + max_s
        with Producer(b.endpoint) as p:
            p.send_batch(TOPIC, [b"%010d" % 0 + pad])          # warm-up: message 0, not counted
            for i in range(1, count + 1):
                if time.perf_counter() > deadline:
                    break
                t0 = time.perf_counter_ns()
                r = p.send_batch(TOPIC, [b"%010d" % i + pad])[0]
                t1 = time.perf_counter_ns()
                if not r.ok:
                    raise RuntimeError(f"send {i} answered {r.code}: {r.error}")
                sent[i], answered[i] = t0, t1
        done.set()
        consumer.join(60)
    lat = [(got[i] - sent[i]) / 1000 for i in sent if i in got]
    ans = [(answered[i] - sent[i]) / 1000 for i in sent]
    early = sum(1 for i in sent if i in got and got[i] < answered[i])
    if len(lat) < len(sent):
        raise RuntimeError(f"{len(sent) - len(lat)} of {len(sent)} messages never reached the consumer")
    return {"n": len(lat), "median": statistics.median(lat), "p90": percentile(lat, 90),
            "answer_median": statistics.median(ans), "early": early}


def main() -> None:
    opts = Options(__doc__, rounds=5, count=300, count_help="messages sent per sample", max_seconds=60.0,
                   quick={"rounds": 2, "count": 100}, quick_help="2 rounds, 100 messages").parse_args()
    rep = Report("consume_latency", params={"body_bytes": BODY_BYTES, "messages_per_sample": opts.count,
                                           "rounds": opts.rounds, "flush_disk_type": "SYNC_FLUSH",
                                           "consumer": "pull_records long poll, wait_s=5", "queues": 1},
                 unit="us (median send -> receipt)", reference=UNLIMITED.name,
                 reference_doc="the same against a broker whose reads are not limited to the flushed offset "
                               "(bench/_unlimited_broker.py: the behaviour before issue 27.2)")
    with scratch_dir("consume_latency") as tmp:
        def reference() -> Sample:
            r = run_sample(tmp, UNLIMITED.module, opts.count, opts.max_seconds)
            _clear(tmp)
            return Sample(r["median"], {"p90_us": r["p90"], "answer_median_us": r["answer_median"],
                                        "early": r["early"]},
                          f"unlimited {r['median']:.0f} us (answer {r['answer_median']:.0f}, early {r['early']})")

        def sample(v: Variant) -> dict:
            r = run_sample(tmp, v.module, opts.count, opts.max_seconds)
            _clear(tmp)
            return r

        def row(v: Variant, ref: Sample, r: dict) -> Sample:
            return Sample(r["median"], {"p90_us": r["p90"], "answer_median_us": r["answer_median"], "early": r["early"]},
                          f"limited {r['median']:.0f} us (answer {r['answer_median']:.0f}, early {r['early']}), "
                          f"x{r['median'] / ref.value:.2f}")

        paired_rounds(rep, opts.rounds, [LIMITED], reference, sample, row)
        rep.ratio(LIMITED.name, None)
        rep.note("ratio = limited / unlimited median latency from send to receipt: above 1 is what the limit "
                 "costs a consumer (here lower is better, unlike the throughput benchmarks).")
        rep.note("early: messages a consumer received before their send was answered (the answer and the "
                 "receipt follow the same fsync when limited; unlimited, the receipt can precede the fsync).")
        rep.write(tmp)
    progress("done")


def _clear(tmp: str) -> None:
    from _report import clear_dir
    clear_dir(tmp)


if __name__ == "__main__":
    main()
