"""Child process of the kill -9 test: writes with SYNC_FLUSH from several threads and
prints "<id> <commitlog_offset>" for every put that returned PUT_OK (flushing stdout
after each batch), so the parent knows exactly what was acknowledged."""

import os
import random
import sys
import threading

from tidemq.store import Message, MessageStore, PutStatus, StoreConfig


def config(root: str) -> StoreConfig:
    return StoreConfig(root_dir=root, auto_create_topics=True, segment_size_bytes=1 << 20, flush_disk_type="SYNC_FLUSH",
                       consume_queue_units_per_segment=1000, index_slots=131_072, index_entries=8192,
                       topic_queues_default=4)


def main() -> None:
    root, first_id, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    store = MessageStore(config(root)).start()
    store.install_signal_handlers()
    out_lock = threading.Lock()

    def writer(t: int) -> None:
        rng = random.Random(first_id + t)
        n = first_id + t * 10_000_000
        while True:
            batch = []
            for _ in range(rng.choice([1, 1, 4, 16])):
                body = b"%d|" % n + os.urandom(rng.choice([10, 200, 1500]))
                batch.append(Message(topic="Kill9", body=body, keys=[f"id{n}"]))
                n += 1
            rs = store.put_batch(batch)
            lines = [f"{int(m.body.split(b'|')[0])} {r.commitlog_offset}\n"
                     for m, r in zip(batch, rs) if r.status is PutStatus.PUT_OK]
            with out_lock:
                sys.stdout.write("".join(lines))
                sys.stdout.flush()

    print("ready", flush=True)
    for t in range(threads):
        threading.Thread(target=writer, args=(t,), daemon=True).start()
    threading.Event().wait()


if __name__ == "__main__":
    main()
