"""`tidemq demo`: put messages into the embedded store, read them back, print what happened."""

from __future__ import annotations

import time

import click

from .common import config_option, load_store_config, quiet_logs, root_option
from .output import emit_json, fail, out, table


@click.command()
@root_option
@config_option
@click.option("--topic", default="DemoTopic", show_default=True)
@click.option("--count", default=10_000, show_default=True, help="messages to write")
@click.option("--size", "body_size", default=1024, show_default=True, help="body bytes")
@click.option("--json", "as_json", is_flag=True, help="print the summary as JSON")
@click.option("-v", "--verbose", is_flag=True)
def demo(root, config_file, topic, count, body_size, as_json, verbose) -> None:
    """Write COUNT messages to TOPIC in batches, read every one back, verify them."""
    from ..store import Message, MessageStore, PutStatus, StoreError

    quiet_logs(verbose)
    cfg = load_store_config(root, config_file, remembered=False)
    try:
        store = MessageStore(cfg).start()
    except (StoreError, OSError) as e:
        fail(f"cannot open the store at {cfg.root_dir}: {e}")
    try:
        rec = store.recovery
        out.print(f"store {cfg.root_dir}: {rec.summary() if rec else ''}")
        queues = store.queue_count(topic) or cfg.topic_queues_default
        store.create_topic(topic, queues)
        starts = [store.max_offset(topic, q) for q in range(queues)]
        t0 = time.perf_counter()
        ok = 0
        batch = 256
        for i in range(0, count, batch):
            msgs = [Message(topic=topic, body=(b"%08d" % (i + j)).ljust(body_size, b"."), tags="demo",
                            keys=[f"demo-{i + j}"]) for j in range(min(batch, count - i))]
            for r in store.put_batch(msgs):
                if r.status is PutStatus.PUT_OK:
                    ok += 1
                else:
                    fail(f"put refused: {r.status.name}: {r.error}")
        t_put = time.perf_counter() - t0
        t0 = time.perf_counter()
        read = 0
        for q in range(queues):
            off = starts[q]
            while True:
                g = store.get("demo", topic, q, off, max_count=32)
                if not g.messages:
                    break
                read += len(g.messages)
                off = g.next_offset
        t_get = time.perf_counter() - t0
        found = store.query_by_key(topic, f"demo-{count - 1}")
        summary = {
            "root": cfg.root_dir, "topic": topic, "queues": queues, "written": ok, "read_back": read,
            "put_msgs_per_s": round(ok / t_put) if t_put else None,
            "get_msgs_per_s": round(read / t_get) if t_get else None,
            "found_by_key": len(found), "commitlog_max_offset": store.commitlog_max_offset,
        }
        if as_json:
            emit_json(summary)
        else:
            table("tidemq demo", ["what", "value"], [[k, v] for k, v in summary.items()])
        if read != ok:
            fail(f"read back {read} of {ok} messages")
    finally:
        store.shutdown()
