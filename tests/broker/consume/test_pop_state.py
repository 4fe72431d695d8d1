"""PopState on its own: the journal across restarts, a torn last line (kill -9 mid-write)."""

import os

from tidemq.broker.consume.pop_state import PopState
from tidemq.io import OsFileIO


def opened(root):
    ps = PopState(OsFileIO(), root)
    ps.open()
    return ps


def test_an_ack_written_after_a_torn_line_holds_across_the_next_restart(tmp_path):
    root = str(tmp_path)
    ps = opened(root)
    h0 = ps.deliver("g", "T", 0, 0, 1, 10_000)
    h1 = ps.deliver("g", "T", 0, 1, 1, 10_000)
    ps.flush()
    with open(os.path.join(root, "pop", "journal"), "ab") as f:
        f.write(b'{"op":"pop","g":"g","t":"T","q":0,"o":2,"a"')    # killed mid-write: no newline
    # no close(): a kill -9 leaves the journal as it is; the next start reads it
    ps = opened(root)
    assert sorted(ps.state("g", "T", 0).inflight) == [0, 1], "the torn line was never answered"
    ps.ack("g", h0)
    ps.flush()
    ps = opened(root)                                  # killed again: the ack must be replayed
    assert sorted(ps.state("g", "T", 0).inflight) == [1], "the ack after the torn line holds"
    ps.ack("g", h1)
    ps.close()
    ps = opened(root)
    assert ps.state("g", "T", 0).inflight == {} and ps.state("g", "T", 0).cursor == 2
    ps.close()


def test_the_handles_secret_is_readable_by_the_broker_only(tmp_path):
    ps = opened(str(tmp_path))
    assert os.stat(os.path.dirname(ps.secret_path)).st_mode & 0o077 == 0, "no one else may list or read the secret"
    ps.close()


def test_a_handle_the_old_leader_gave_after_its_last_copy_is_stale_on_the_new_one(tmp_path):
    """A follower opens its leader's last copied pop state (replication/state.py) when promoted. The
    old leader went on delivering after that copy; the new leader's seq went on from the copy's, so it
    made the very same receipt handles for the same messages: an old consumer's ack (or change of
    invisible time) took effect on the new leader's delivery of it to another consumer (a FIFO queue
    freed while its message was still being consumed)."""
    import pytest

    from tidemq.broker.consume.pop_state import HandleError
    from tidemq.broker.state import journal
    from tidemq.io import write_atomic

    leader = opened(str(tmp_path / "leader"))
    leader.deliver("g", "T", 0, 0, 1, 10_000)
    copy = leader.snapshot()                           # the follower's last copy
    follower_dir = str(tmp_path / "follower")
    fio = OsFileIO()
    fio.makedirs(os.path.join(follower_dir, "pop"))
    write_atomic(fio, leader.secret_path.replace(str(tmp_path / "leader"), follower_dir), leader.secret)
    journal.write_state(fio, os.path.join(follower_dir, "pop"), copy)
    old = leader.deliver("g", "T", 0, 1, 1, 10_000)   # after the copy, to consumer A
    promoted = opened(follower_dir)
    new = promoted.deliver("g", "T", 0, 1, 1, 10_000)  # the new leader gives it to consumer B
    assert new != old
    with pytest.raises(HandleError):
        promoted.ack("g", old)
    assert 1 in promoted.state("g", "T", 0).inflight, "B's delivery is still in flight"
    leader.close()
    promoted.close()


def _forged(handle: str, group: str, key: bytes) -> str:
    """``handle`` with its MAC made again under ``key`` (what anyone who knows the key can do)."""
    import hashlib
    import hmac
    topic, qid, offset, seq, _mac = handle.rsplit(":", 4)
    mac = hmac.new(key, f"{group}|{topic}|{qid}|{offset}|{seq}".encode(), hashlib.sha1).hexdigest()[:16]
    return f"{topic}:{qid}:{offset}:{seq}:{mac}"


def test_a_damaged_handle_key_is_never_used_so_no_handle_made_under_what_is_left_of_it_verifies(tmp_path):
    """The key file cut short or emptied (a torn copy, a full disk) was used as read: an empty key is
    one anyone knows, and a handle MACed under it was accepted (an ack of another consumer's message).
    Now a damaged key is replaced (protection/handle_key.py), both copies damaged: handles under it fail."""
    import pytest

    from tidemq.broker.consume.pop_state import HandleError

    root = str(tmp_path)
    opened(root).close()
    for p in (os.path.join(root, "pop", "secret"), os.path.join(root, "pop", "secret.bak")):
        if os.path.exists(p):
            open(p, "wb").close()                       # emptied
    ps = opened(root)
    h = ps.deliver("g", "T", 0, 0, 1, 60_000)
    with pytest.raises(HandleError):
        ps.ack("g", _forged(h, "g", b""))
    assert 0 in ps.state("g", "T", 0).inflight, "the forged ack took nothing"
    ps.ack("g", h)
    ps.close()


def test_a_damaged_key_file_falls_back_to_its_mirror_and_outstanding_handles_stay_valid(tmp_path):
    root = str(tmp_path)
    ps = opened(root)
    h = ps.deliver("g", "T", 0, 0, 1, 60_000)
    ps.flush()
    with open(os.path.join(root, "pop", "secret"), "r+b") as f:
        f.truncate(20)                                  # cut short
    ps = opened(root)
    ps.ack("g", h)                                      # the same key, from the intact mirror
    assert ps.state("g", "T", 0).inflight == {}
    ps.close()
    assert opened(root).secret == ps.secret, "and the file is whole again"


def test_the_last_record_the_cursor_counted_holds_across_the_journal_and_its_snapshot(tmp_path):
    """QueueState.last (consume/reused.py): a delivery's commit-log offset, a skip's unit at the new
    cursor - 1, as the journal replays them and as the snapshot keeps them; a reset forgets it."""
    root = str(tmp_path)
    ps = opened(root)
    ps.unit_at = lambda t, q, o: {4: 777}.get(o)
    ps.deliver("g", "T", 0, 0, 1, 1, commitlog_offset=55)
    assert ps.state("g", "T", 0).last == (0, 55)
    ps.skip_to("g", "T", 0, 5)
    ps.flush()
    ps.journal.abandon()                            # a kill -9: replayed from the journal
    ps = opened(root)
    assert ps.state("g", "T", 0).last == (4, 777) and ps.state("g", "T", 0).cursor == 5
    ps.close()                                      # into the snapshot
    ps = opened(root)
    assert ps.state("g", "T", 0).last == (4, 777)
    ps.reset("g", "T", 0, 2)
    assert ps.state("g", "T", 0).last is None
    ps.close()
