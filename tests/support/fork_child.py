"""Child process of tests/client/test_iter_records_e2e.py: PullConsumer.iter_records carried over
a fork with pulls under way, in a process of its own.

    python -m tests.support.fork_child ENDPOINT TOPIC COUNT

Iterates queue 0 of TOPIC from offset 0 with pulls under way, forks, and reads the rest in
both processes; prints one line and exits 0 when both read offsets [0, COUNT) exactly, the body
at offset i being b"p-<i>" (what the test sent).

A process of its own because gRPC survives a fork only with its fork support on
(GRPC_ENABLE_FORK_SUPPORT=1, read when grpc is imported: the parent test sets it for this
process) and only when no other thread is inside gRPC at the fork, which the test process
cannot promise (the official client's I/O loop polls there all the time)."""

import os
import sys


def main(endpoint: str, topic: str, count: int) -> int:
    from tidemq.client import PullConsumer

    def offsets(rs):
        ms = [m for r in rs for m in r.messages()]
        if any(m.body != b"p-%d" % m.queue_offset for m in ms):
            return None
        return [m.queue_offset for m in ms]

    with PullConsumer(endpoint) as c:
        it = c.iter_records(topic, 0, 0, count, max_count=100, prefetch=2)
        first = next(it)
        pid = os.fork()
        if pid == 0:
            try:
                os._exit(0 if offsets([first, *it]) == list(range(count)) else 1)
            except BaseException:           # noqa: BLE001 - the child must end with a code, whatever happens
                os._exit(2)
        parent_ok = offsets([first, *it]) == list(range(count))
        _, status = os.waitpid(pid, 0)
    print(f"parent read everything: {parent_ok}; child exit status: {status}", flush=True)
    return 0 if parent_ok and status == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
