"""Damage never costs an intact message (issue 12): a stopped multi-segment store on the real
file system, its files damaged by hand (bytes flipped or zeroed in a record, a whole segment
zeroed, a torn last record), an abort file and an empty / random / valid checkpoint; after the
restart every intact message is read back through get, the damaged ones are counted and never
served, and only a genuine torn tail is cut."""

from __future__ import annotations

import os

import pytest

from tidemq.store import GetStatus, Message, MessageStore, PutStatus

from ..support.store import small_config

SEG = 64 * 1024
TOPIC = "D"
QUEUES = 3


def body_of(i: int) -> bytes:
    return b"m%06d-" % i + bytes([i % 251]) * (200 + i % 97)


def fill(root, n=700):
    """A stopped store of ``n`` messages over several segments; their (phys, size) by number."""
    s = MessageStore(small_config(root, segment_size_bytes=SEG, topic_queues_default=QUEUES)).start()
    try:
        rs = s.put_batch([Message(TOPIC, body_of(i)) for i in range(n)])
        assert all(r.status is PutStatus.PUT_OK for r in rs)
        assert len(s.segments) >= 4, len(s.segments)
    finally:
        s.shutdown()
    return {i: (r.commitlog_offset, r.size) for i, r in enumerate(rs)}


def seg_path(root, k: int) -> str:
    return os.path.join(str(root), "commitlog", "%020d" % (k * SEG))


def damage(root, offset: int, data: bytes | None = None, length: int = 64, flip: bool = True) -> tuple[int, int]:
    """Flip (or overwrite with ``data`` / zeroes) ``length`` bytes at commit-log ``offset``."""
    with open(seg_path(root, offset // SEG), "r+b") as f:
        f.seek(offset % SEG)
        old = f.read(length)
        new = bytes(b ^ 0xFF for b in old) if flip else (data if data is not None else bytes(length))
        f.seek(offset % SEG)
        f.write(new)
    return offset, offset + length


def crash_state(root, checkpoint: str, abort: bool = True) -> None:
    """The files as a crash leaves them: an abort file; the checkpoint as asked ("valid": kept)."""
    if abort:
        open(os.path.join(str(root), "abort"), "wb").close()
    cp = os.path.join(str(root), "checkpoint")
    if checkpoint == "empty":
        open(cp, "wb").close()
    elif checkpoint == "random":
        with open(cp, "wb") as f:
            f.write(os.urandom(4096))


def read_all(s: MessageStore) -> dict[bytes, int]:
    """body -> times served, over every queue from its min offset to its max (consumers advance)."""
    out: dict[bytes, int] = {}
    for q in range(QUEUES):
        off, hi = s.min_offset(TOPIC, q), s.max_offset(TOPIC, q)
        while off < hi:
            g = s.get("g", TOPIC, q, off, max_count=32)
            assert g.next_offset > off, f"stuck at {TOPIC}/{q}@{off}: {g.status}"
            for m in g.messages:
                out[m.body] = out.get(m.body, 0) + 1
            off = g.next_offset
    return out


def check_outcome(s: MessageStore, recs: dict, hit: tuple[int, int]) -> tuple[set, set]:
    """(intact lost, damaged served): both must be empty."""
    damaged = {i for i, (p, n) in recs.items() if p < hit[1] and hit[0] < p + n}
    got = read_all(s)
    lost = {i for i in recs if i not in damaged and got.get(body_of(i)) != 1}
    served = set(got) - {body_of(i) for i in recs}
    assert damaged, "the damage hit no record"
    return lost, served | {i for i in damaged if body_of(i) in got}


SCENARIOS = {
    # name: (checkpoint, abort file, segment damaged (negative: from the last), how)
    "abort-empty-checkpoint-flip-segment0": ("empty", True, 0, "flip"),
    "abort-random-checkpoint-flip-segment0": ("random", True, 0, "flip"),
    "abort-valid-checkpoint-flip-middle": ("valid", True, 1, "flip"),
    # (a normal start checks the last three segments: -2, the one before the last)
    "no-abort-valid-checkpoint-flip-middle": ("valid", False, -2, "flip"),
    "no-abort-random-checkpoint-flip-middle": ("random", False, -2, "flip"),
    "abort-empty-checkpoint-zeroes-middle": ("empty", True, 1, "zero"),
    "abort-random-checkpoint-magic-segment0": ("random", True, 0, "magic"),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_damage_inside_the_log_is_skipped_kept_and_counted(tmp_path, name, caplog):
    checkpoint, abort, seg, how = SCENARIOS[name]
    root = tmp_path / "store"
    recs = fill(root)
    if seg < 0:
        seg += len([n for n in os.listdir(os.path.join(str(root), "commitlog")) if n.isdigit()])
    mid = seg * SEG + SEG // 2
    victim = next(i for i, (p, n) in recs.items() if p <= mid < p + n)
    p, n = recs[victim]
    if how == "flip":
        hit = damage(root, mid, length=64)
    elif how == "zero":
        hit = damage(root, p - 1000, flip=False, length=4096)
    else:                                               # the record's MAGIC
        hit = damage(root, p + 4, length=4)
    crash_state(root, checkpoint, abort)
    end_before = max(p + n for p, n in recs.values())
    with caplog.at_level("WARNING", logger="tidemq.store"):
        s = MessageStore(small_config(root, segment_size_bytes=SEG, topic_queues_default=QUEUES)).start()
    try:
        rep = s.recovery
        said = [r for r in caplog.records if r.name == "tidemq.store" and r.getMessage().startswith(
            "commit log: damaged record(s) at commit-log offsets")]
        assert said and said[0].levelname == "WARNING", [r.getMessage() for r in caplog.records]
        first = said[0].getMessage()
        lo, hi = (int(x) for x in first.split("offsets [")[1].split(")")[0].split(", "))
        assert lo < hit[1] and hit[0] < hi, f"the line names the damaged stretch {hit}: {first}"
        assert "skipped, kept, not cut" in first and "%020d" % (seg * SEG) in first, first
        assert rep.abnormal is abort
        assert rep.checkpoint_valid is (checkpoint == "valid")
        assert s.commit_log.max_offset == end_before, rep.summary()
        assert rep.bytes_cut == 0 and rep.damaged_regions >= 1, rep.summary()
        lost, served = check_outcome(s, recs, hit)
        assert lost == set(), f"intact messages lost: {sorted(lost)[:10]} ({rep.summary()})"
        assert served == set(), f"damaged records served: {sorted(served)[:10]}"
        assert s.stats()["records_damaged"] >= 1
        check = s.check()
        assert not check.ok and check.damaged_regions >= 1, "verify reports the damaged record"
    finally:
        s.shutdown()


def test_a_wholly_zeroed_middle_segment_is_kept_and_the_segments_after_it_too(tmp_path):
    root = tmp_path / "store"
    recs = fill(root)
    with open(seg_path(root, 1), "r+b") as f:
        f.write(bytes(SEG))
    crash_state(root, "empty")
    s = MessageStore(small_config(root, segment_size_bytes=SEG, topic_queues_default=QUEUES)).start()
    try:
        assert len(s.segments) >= 4, "no segment deleted"
        lost, served = check_outcome(s, recs, (SEG, 2 * SEG))
        assert lost == set() and served == set(), (sorted(lost)[:10], s.recovery.summary())
    finally:
        s.shutdown()


def test_damage_in_the_last_segment_before_intact_records_is_not_a_tail(tmp_path):
    root = tmp_path / "store"
    recs = fill(root)
    last = max(recs, key=lambda i: recs[i][0])
    p, _n = recs[last - 5]                               # five intact records follow it
    hit = damage(root, p + 100, length=16)
    crash_state(root, "random")
    s = MessageStore(small_config(root, segment_size_bytes=SEG, topic_queues_default=QUEUES)).start()
    try:
        assert s.recovery.bytes_cut == 0, s.recovery.summary()
        lost, served = check_outcome(s, recs, hit)
        assert lost == set() and served == set()
    finally:
        s.shutdown()


@pytest.mark.parametrize("checkpoint", ["empty", "random"])
def test_a_genuine_torn_tail_is_still_cut(tmp_path, checkpoint):
    root = tmp_path / "store"
    recs = fill(root)
    last = max(recs, key=lambda i: recs[i][0])
    p, n = recs[last]
    damage(root, p + n // 2, flip=False, length=n - n // 2)          # its second half never reached the disk
    crash_state(root, checkpoint)
    s = MessageStore(small_config(root, segment_size_bytes=SEG, topic_queues_default=QUEUES)).start()
    try:
        rep = s.recovery
        assert s.commit_log.max_offset == p, rep.summary()
        assert rep.damaged_regions == 0, rep.summary()
        got = read_all(s)
        assert all(got.get(body_of(i)) == 1 for i in recs if i != last)
        assert body_of(last) not in got
        assert s.check().ok, s.check().problems
        assert s.put(Message(TOPIC, b"after")).ok
    finally:
        s.shutdown()


def test_lost_consume_queues_are_rebuilt_past_damage_without_a_checkpoint(tmp_path):
    """Dispatch goes on after a skipped region: every intact record gets its unit again."""
    import shutil
    root = tmp_path / "store"
    recs = fill(root)
    hit = damage(root, SEG // 2, length=64)
    crash_state(root, "random")
    shutil.rmtree(os.path.join(str(root), "consumequeue"))
    s = MessageStore(small_config(root, segment_size_bytes=SEG, topic_queues_default=QUEUES)).start()
    try:
        assert s.recovery.consume_queues_rebuilt_all
        lost, served = check_outcome(s, recs, hit)
        assert lost == set() and served == set()
        assert s.get("g", TOPIC, 0, s.max_offset(TOPIC, 0) - 1).status is GetStatus.FOUND
    finally:
        s.shutdown()


def test_a_bad_record_above_a_valid_checkpoints_durable_offset_is_a_tear(stores):
    """The one place the checkpoint matters: above its durable offset nothing was flushed, a power
    loss may drop any page there, and a bad record is a tear: the log is cut at it even when
    records that survived follow (the log stays a prefix of what was written, as the crash
    simulation requires), and the report counts them. Below it the same damage is kept."""
    from tidemq.testing.faulty_io import FaultyFileIO

    from ..support.store import MEMORY_ROOT, memory_config
    cfg = memory_config(segment_size_bytes=64 * 1024)
    fio = FaultyFileIO()
    s = stores(cfg, fio)
    rs = s.put_batch([Message("T", b"m%02d" % i + b"x" * 200) for i in range(60)])
    s.commit_log.flush()
    s.flush_queues()                                   # checkpoint: durable up to record 59's end
    assert s.checkpoint.state.physic_offset == rs[-1].commitlog_offset + rs[-1].size
    more = s.put_batch([Message("T", b"m%02d" % i + b"x" * 200) for i in range(60, 100)])   # not flushed
    s.kill()
    fio = fio.after_crash()
    seg = fio.files[MEMORY_ROOT + "/commitlog/" + "0" * 20].data
    seg[rs[20].commitlog_offset + 100] ^= 0xFF         # below the durable offset: damage, kept
    seg[more[10].commitlog_offset + 100] ^= 0xFF       # above it: a tear
    s = stores(cfg, fio)
    rep = s.recovery
    assert rep.abnormal and rep.checkpoint_valid
    assert s.commit_log.max_offset == more[10].commitlog_offset, rep.summary()
    assert rep.records_dropped_after_tear == 29 and rep.damaged_regions == 1, rep.summary()
    got, off = [], 0
    while off < s.max_offset("T", 0):
        g = s.get("g", "T", 0, off, max_count=32)
        got += [m.body[:3] for m in g.messages]
        off = g.next_offset
    assert got == [b"m%02d" % i for i in range(70) if i != 20]
