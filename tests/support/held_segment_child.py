"""Child process of tests/store/test_cleaner_e2e.py: a store on real files whose head segment a
reader holds while a cleanup takes it out of service.

    python -m tests.support.held_segment_child ROOT

Writes enough to fill a few segments, holds the first one as a reader does, makes every sealed
segment expired and runs one cleanup round, then prints one JSON line: the held segment's path and
end offset, every queue's minimum after the round, and whether the held mapping still reads the
segment's first record (its magic and topic). Then waits, the segment still held, for the parent's
SIGKILL or SIGTERM (a clean shutdown: install_signal_handlers)."""

import json
import sys
import threading

from tidemq.record import codec
from tidemq.store import Message, MessageStore

from .store import small_config

TOPIC = "Held"


def config(root: str):
    # every sealed segment expired at once; no cleanup round but the one this child runs
    return small_config(root, file_reserved_time_hours=0.0, clean_resource_interval_ms=3_600_000,
                        topic_queues_default=2)


def main(root: str) -> None:
    store = MessageStore(config(root)).start()
    store.install_signal_handlers()
    i = 0
    while len(store.segments) < 4:
        assert store.put(Message(TOPIC, b"h%05d" % i + b"x" * 500)).ok
        i += 1
    store.commit_log.flush()
    store.flush_queues()
    held = store.segments.segments[0]
    assert held.hold()
    store.trigger_delete_expired()
    store.clean()
    readable = held.mapping[4:8] == codec.MAGIC_BYTES and codec.decode_meta(held.mapping, 0)[3] == TOPIC
    print(json.dumps({"path": held.path, "end_offset": held.end_offset, "reads_on": readable,
                      "out_of_service": store.cleaner.last.out_of_service,
                      "queue_min": {q: store.min_offset(TOPIC, q) for q in range(store.queue_count(TOPIC))}}),
          flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1])
