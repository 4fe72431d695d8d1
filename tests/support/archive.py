"""A store whose commit log is on a small real disk (a 16 MiB tmpfs) with archive_before_delete,
and the writer that fills it until the disk's warning level refuses: what the archive's and the
tiered reads' tests share."""

import time

from tidemq.store import Message, PutStatus, StoreConfig

MIB = 1 << 20
PAD = b"." * 2000


def config(root, cl_dir, **kw):
    return StoreConfig(root_dir=str(root), commitlog_dirs=(cl_dir,), segment_size_bytes=MIB,
                       preallocate_next_segment=False, index_enabled=False, consume_queue_units_per_segment=1000,
                       clean_resource_interval_ms=600_000, delete_commit_log_files_interval_ms=0,
                       file_reserved_time_hours=0, delete_when=f"{(time.localtime().tm_hour + 12) % 24:02d}",
                       archive_before_delete=True, **kw)


def fill(store, acked: list, seq: int, batches: int) -> tuple[int, list]:
    """Put batches of 50 (cleanup after each, as the periodic service would); the refusals seen."""
    refusals = []
    for _ in range(batches):
        msgs = [Message(topic="Arch", body=b"m%08d" % (seq + i) + PAD) for i in range(50)]
        rs = store.put_batch(msgs)
        for m, r in zip(msgs, rs):
            if r.status is PutStatus.PUT_OK:
                acked.append(m.body[:9])
            else:
                refusals.append(r.error)
        seq += 50
        store.clean()
    return seq, refusals


def archiving_store(env, tmp_path, queues: int, **kw):
    """A store whose commit log is on a 16 MiB tmpfs, topic Arch: (store, root, archive dest, log dir)."""
    cl = env.tmpfs("cl", 16)
    root, dest = str(tmp_path / "root"), str(tmp_path / "archive")
    s = env.open(config(root, cl, **kw))
    s.create_topic("Arch", queues)
    return s, root, dest, cl
