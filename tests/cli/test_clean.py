"""`tidemq clean --force` against a real broker whose sealed segments are expired (retention 0 h,
outside its delete hour): it deletes them and reports how many and how many MiB."""

import json
import os
import time

from click.testing import CliRunner

from tidemq.cli.main import cli
from tidemq.client import Producer

from ..support.brokers import SMALL

T = "old"


def run(*args, input=None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)


def test_clean_force_deletes_expired_segments_and_says_what_it_freed(broker_factory):
    not_now = (time.localtime().tm_hour + 12) % 24          # the delete hour is far: only the manual round deletes
    env = {**SMALL, "TIDEMQ_SEGMENT_SIZE_BYTES": str(1 << 20), "TIDEMQ_FILE_RESERVED_TIME_HOURS": "0",
           "TIDEMQ_DELETE_WHEN": f"{not_now:02d}", "TIDEMQ_CLEAN_RESOURCE_INTERVAL_MS": "200"}
    b = broker_factory(env=env, args=["--auto-create-topics"])
    ep = ("--endpoint", b.endpoint)
    try:
        with Producer(b.endpoint) as p:
            for _ in range(7):                               # ~4 MiB: sealed 1 MiB segments, and the active one
                assert all(r.ok for r in p.send_batch(T, [b"x" * 1024] * 500))
        before = json.loads(run("disk", "--json", *ep).output)
        assert before["last_cleanup"]["deleted"] == [] and before["commitlog"]["min_offset"] == 0
        sealed = before["commitlog"]["max_offset"] >> 20     # 1 MiB segments: the ones before the active one
        assert sealed >= 3
        r = run("clean", "--force", *ep, input="y\n")
        assert r.exit_code == 0, r.output
        line = r.output.splitlines()[-1]
        assert line.startswith(f"deleted {sealed} segment(s), {sealed}.0 MiB") and \
            f"commit log now starts at {sealed << 20}" in line, line
        after = json.loads(run("disk", "--json", *ep).output)
        assert after["commitlog"]["min_offset"] == sealed << 20
        # the last round that deleted something stays visible; the forced clean may take more than one
        # round (a segment a reader still holds is retried next round), so it holds the last of them
        last = after["last_cleanup"]["deleted"]
        n = len(last)
        assert 1 <= n <= sealed, "the last cleanup that deleted something stays visible"
        assert {os.path.basename(p) for p in last} <= {f"{i << 20:020d}" for i in range(sealed)}, last
        assert f"{(sealed - 1) << 20:020d}" in {os.path.basename(p) for p in last}, last
        r = run("disk", *ep)
        assert f"last cleanup: deleted {n} segment(s), {n}.0 MiB" in r.output and "expired" in r.output, r.output
        r = run("clean", "--force", "--yes", "--json", *ep)                  # nothing more to delete
        rep = json.loads(r.output)
        assert r.exit_code == 0 and rep["deleted_segments"] == 0 and rep["deleted_bytes"] == 0
        assert rep["commitlog_min_offset"] == {"before": sealed << 20, "after": sealed << 20}
    finally:
        assert b.stop() == 0


def _status(at_ms, deleted, total, why_not_code=None, left=20, min_offset=0, triggers=("manual",)):
    """An admin DiskStatus answer: the last round (``deleted`` segments), the cleaner's totals."""
    return {"status": {"last_round": {"at_ms": at_ms, "deleted": ["s"] * deleted, "deleted_bytes": deleted << 20,
                                      "why_not": "segment x is held by 1 reader(s); retried next round"
                                      if why_not_code else None, "why_not_code": why_not_code,
                                      "triggers": list(triggers)},
                       "manual_rounds_left": left,
                       "commitlog": {"min_offset": min_offset, "deleted_segments_by_reason": {"expired": total},
                                     "deleted_bytes_total": total << 20}}}


def clean_with(monkeypatch, answers):
    from tidemq.cli import common
    it = iter(answers)
    monkeypatch.setattr(common, "admin_call", lambda *a, **k: next(it))
    return run("clean", "--force", "--yes", "--endpoint", "127.0.0.1:1")


def test_a_segment_a_reader_held_is_waited_for_and_counted(monkeypatch):
    """The first forced round could not delete a segment a reader held ("retried next round"):
    the command waits for the next round and reports what both freed."""
    r = clean_with(monkeypatch, [_status(1, 0, 0), {"ok": True}, _status(1, 0, 0),
                                 _status(2, 1, 1, "held-by-reader", 19, 1 << 20), _status(3, 3, 4, None, 18, 4 << 20)])
    assert r.exit_code == 0, r.output
    assert r.output.strip() == "deleted 4 segment(s), 4.0 MiB; commit log now starts at 4194304"


def test_what_a_round_freed_counts_though_a_later_round_replaced_it(monkeypatch):
    """On a busy machine the command looks late: the forced round that deleted was followed by
    another that found nothing. A round that began before the request is not the forced one."""
    r = clean_with(monkeypatch, [_status(1, 0, 0), {"ok": True},
                                 _status(2, 0, 0, triggers=("time",)),           # began before the request
                                 _status(4, 0, 4, None, 18, 4 << 20)])            # round 3 deleted 4, round 4 none
    assert r.exit_code == 0, r.output
    assert r.output.strip() == "deleted 4 segment(s), 4.0 MiB; commit log now starts at 4194304"


def test_clean_force_asks_first_and_frees_nothing_in_a_new_store(broker):
    ep = ("--endpoint", broker.endpoint)
    r = run("clean", "--force", *ep, input="n\n")
    assert r.exit_code == 1 and "Aborted" in r.output
    r = run("clean", "--force", "--yes", "--json", *ep)
    rep = json.loads(r.output)
    assert r.exit_code == 0 and rep["deleted_segments"] == 0, "nothing expired in a new store"
