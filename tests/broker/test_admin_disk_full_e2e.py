"""An admin change the broker cannot write to its disk (a full file system) answers a typed refusal
(STATE_WRITE_FAILED: nothing changed) instead of an exception out of the handler (gRPC UNKNOWN and a
traceback in the broker's log), and the same change succeeds once there is room, without a restart.
Real processes on a real 16 MiB tmpfs."""

import os
import time

from tidemq.client import admin
from tidemq.protocol.signing import date_time, signed_metadata

from ..support.auth import AUTH
from ..support.brokers import make_topic
from ..support.tmpfs import fill_to_last_page

ENV = {**AUTH, "TIDEMQ_SEGMENT_SIZE_BYTES": str(1 << 20), "TIDEMQ_PREALLOCATE_NEXT_SEGMENT": "false"}
SUPER = ("tidemq-ak", "s3cret-sk")


def call(b, method, request):
    md = signed_metadata(*SUPER, date_time(time.time()))
    return admin.call(b.endpoint, method, request, timeout_s=60.0, metadata=md)


def fill(d: str) -> str:
    """Fill the file system of ``d`` to the last page (again: a failed write that replaced a .bak
    freed its pages)."""
    return fill_to_last_page(d)


def test_admin_changes_on_a_full_disk_answer_a_typed_refusal_and_change_nothing(env, broker_factory):
    """Each change on a full disk is either written (a rewrite may reuse the pages of the .bak it
    replaces) and in effect, or refused with STATE_WRITE_FAILED and not in effect; a new file's first
    write (a group) cannot be made. A user's is written and in effect when only its mirrored copy
    cannot be (checked.write_mirrored: before, refused while the file held it, in effect at the next
    start). Then, with room again, every change is made."""
    root = env.tmpfs("root", 16)
    make_topic(root, "T", 1)
    b = broker_factory(root, env=ENV)
    assert call(b, "CreateUser", {"name": "before", "secret_key": "secret-before"})["ok"]

    def users():
        return {u["name"] for u in call(b, "ListUsers", {})["users"]}

    changes = [("CreateUser", {"name": "app", "secret_key": "secret-of-app"}, lambda: "app" in users()),
               ("CreateGroup", {"group": "g1", "retry_max": 2},
                lambda: call(b, "Groups", {"group": "g1"})["created"]),
               ("Grant", {"user": "before", "resource": "topic:T", "actions": ["pub"]},
                lambda: call(b, "ListAcl", {"user": "before"})["policies"]["before"] != []),
               ("TopicConfig", {"topic": "T", "set": {"retention_hours": 5}},
                lambda: call(b, "TopicConfig", {"topic": "T"})["settings"]["retention_hours"] == 5),
               ("CreateTopic", {"name": "U", "queues": 2},
                lambda: "U" in {t["topic"] for t in call(b, "ListTopics", {})["topics"]})]
    ballast = None
    refused = []
    for method, req, done in changes:
        ballast = fill(root)
        r = call(b, method, req)
        if r["ok"]:
            assert done(), (method, "answered OK: in effect")
        else:
            assert r.get("code") == "STATE_WRITE_FAILED" and "nothing changed" in r["error"], (method, r)
            assert not done(), (method, "refused: not in effect")
            refused.append(method)
    assert "CreateGroup" in refused, refused
    os.unlink(ballast)
    for method, req, done in changes:
        if method in refused:
            assert call(b, method, req)["ok"] and done(), method
