"""Admin methods over real parts: ResetGroup moves pull offsets and pop cursors (in-flight
messages forgotten, delivered again), survives a restart of the pop state, refuses bad requests."""

import pytest

from tidemq.broker.admin import answer, reset_group
from tidemq.broker.consume import group_admin
from tidemq.broker.consume.groups import GroupTable
from tidemq.broker.consume.group_offsets import GroupOffsets
from tidemq.broker.consume.pop_state import HandleError, PopState
from tidemq.io import OsFileIO
from tidemq.protocol import admin as api
from tidemq.store import Message, MessageStore
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import small_config

T = "orders"


@pytest.fixture
def parts(tmp_path):
    store = MessageStore(small_config(tmp_path / "store", topic_queues_default=2)).start()
    for i in range(10):
        assert store.put(Message(T, b"m%d" % i, queue_id=i % 2)).ok
    offsets = GroupOffsets(OsFileIO(), str(tmp_path / "state"))
    pop = PopState(OsFileIO(), str(tmp_path / "state"))
    pop.open()
    yield store, offsets, pop, tmp_path
    pop.close()
    store.shutdown()


def test_a_pop_group_is_reset_and_what_it_had_in_flight_comes_again(parts):
    store, offsets, pop, tmp_path = parts
    handles = [pop.deliver("g", T, 0, o, 1, visible_at_ms=2**62) for o in range(3)]
    pop.ack("g", handles[0])
    assert pop.state("g", T, 0).committed == 1 and len(pop.state("g", T, 0).inflight) == 2
    rows = reset_group(store, offsets, pop, "g", T, "earliest")
    assert {(r["queue"], r["kind"], r["to"]) for r in rows} == {(0, "pop", 0), (1, "pop", 0)}
    assert [r["from"] for r in rows if r["queue"] == 0] == [1]
    st = pop.state("g", T, 0)
    assert st.cursor == 0 and not st.inflight, "nothing in flight: delivered again from 0"
    with pytest.raises(HandleError):
        pop.ack("g", handles[1])                         # its handle is stale
    assert offsets.get("g", T, 0) is None, "a pop-only group gets no pull offsets"

    rows = reset_group(store, offsets, pop, "g", T, "latest")
    assert [r["to"] for r in rows] == [5, 5]
    pop.close()                                         # the reset is in the journal
    again = PopState(OsFileIO(), str(tmp_path / "state"))
    again.open()
    assert again.state("g", T, 0).cursor == 5 and again.state("g", T, 1).cursor == 5
    again.close()


def test_a_pull_group_and_offsets_or_times_given(parts):
    store, offsets, pop, _ = parts
    offsets.set("p", T, 0, 4)
    rows = reset_group(store, offsets, pop, "p", T, 2)
    assert [(r["kind"], r["from"], r["to"]) for r in rows] == [("pull", 4, 2), ("pull", None, 2)]
    assert reset_group(store, offsets, pop, "p", T, 99)[0]["to"] == 5, "an offset past the end: the end"
    first_ms = store.get("x", T, 0, 0).messages[0].store_timestamp_ms
    assert reset_group(store, offsets, pop, "p", T, first_ms)[0]["to"] == 0
    assert reset_group(store, offsets, pop, "p", T, 2**62)[0]["to"] == 5


def test_bad_reset_requests_are_refused_with_a_reason():
    for bad in ({}, {"group": "g", "topic": T}, {"group": "g", "topic": T, "to": "soon"},
                {"group": "g", "topic": T, "to": -1}, {"group": "", "topic": T, "to": 0},
                {"group": "g", "topic": T, "to": True}, []):
        with pytest.raises(ValueError):
            api.reset_request(bad)
    assert api.reset_request({"group": "g", "topic": T, "to": "latest"}) == ("g", T, "latest", False, False)
    for bad in ({"group": "g", "topic": T, "to": "latest", "offsets": {"0": 1}},      # two targets
                {"group": "g", "topic": T, "offsets": {}}, {"group": "g", "topic": T, "offsets": {"x": 1}},
                {"group": "g", "topic": T, "offsets": {"0": -1}}, {"group": "g", "topic": T, "offsets": [1]},
                {"group": "g", "topic": T, "to": 0, "dry_run": "yes"}, {"group": "g", "topic": T, "timestamp_ms": -5}):
        with pytest.raises(ValueError):
            api.reset_request(bad)
    assert api.reset_request({"group": "g", "topic": T, "offsets": {"0": 42, "1": 17}, "dry_run": True,
                              "force": True}) == ("g", T, {0: 42, 1: 17}, True, True)
    assert api.reset_request({"group": "g", "topic": T, "timestamp_ms": 5})[2] == {"timestamp_ms": 5}


def test_a_dry_run_changes_nothing_and_per_queue_offsets_move_only_those_queues(parts):
    store, offsets, pop, _ = parts
    offsets.set("p", T, 0, 4)
    offsets.set("p", T, 1, 3)
    at = dict(offsets.committed_at_ms)
    rows = reset_group(store, offsets, pop, "p", T, "earliest", dry_run=True)
    assert [(r["queue"], r["from"], r["to"]) for r in rows] == [(0, 4, 0), (1, 3, 0)]
    assert (offsets.get("p", T, 0), offsets.get("p", T, 1)) == (4, 3), "a dry run changes nothing"
    rows = reset_group(store, offsets, pop, "p", T, {1: 1})
    assert [(r["queue"], r["from"], r["to"]) for r in rows] == [(1, 3, 1)]
    assert (offsets.get("p", T, 0), offsets.get("p", T, 1)) == (4, 1), "queue 0 untouched"
    assert reset_group(store, offsets, pop, "p", T, {0: 99})[0]["to"] == 5, "past the end: the end"
    first_ms = store.get("x", T, 0, 0).messages[0].store_timestamp_ms
    assert reset_group(store, offsets, pop, "p", T, {"timestamp_ms": first_ms})[0]["to"] == 0
    assert offsets.committed_at_ms == at, "a reset is not a consumption: the group's last-consumed time stays"


def test_live_consumers_are_the_topics_a_group_consumed_within_the_idle_time():
    from tidemq.broker.admin import live_consumers
    rows = [{"topic": "a", "last_consumed_ms": 1_000}, {"topic": "b", "last_consumed_ms": None},
            {"topic": "c", "last_consumed_ms": 100_000}]
    assert live_consumers(rows, 30.0, now_ms=110_000) == ["c"]
    assert live_consumers(rows, 30.0, now_ms=200_000) == []
    assert live_consumers(rows, 1_000.0, now_ms=110_000) == ["a", "c"]


def test_counts_a_request_names_are_bounded_and_refused_with_a_typed_code(parts):
    """CreateTopic with a million queues is refused before anything is made (it took 7.6 s and
    ~900 MiB, and again at every start); a Query asking for more than query_messages_max too."""
    from tidemq.broker.admin import Admin
    store, _offsets, _pop, _tmp = parts
    admin = Admin(store)
    queues_before = len(store.queues.all())
    r = admin.create_topic({"name": "Huge", "queues": 1_000_000})
    assert r["ok"] is False and r["code"] == api.Refusal.LIMIT_EXCEEDED.value and "topic_queues_max" in r["error"], r
    assert store.queue_count("Huge") == 0 and len(store.queues.all()) == queues_before, "nothing was made"
    r = admin.create_topic({"name": "Huge", "queues": 1 << 40})
    assert r["code"] == "BAD_REQUEST", "beyond any count: a bad request"
    r = admin.create_topic({"name": "Fine", "queues": store.config.topic_queues_max})
    assert r["ok"] and r["queues"] == store.config.topic_queues_max
    r = admin.query({"topic": T, "key": "k", "max": api.QUERY_MAX + 1})
    assert r["ok"] is False and r["code"] == "LIMIT_EXCEEDED", r
    assert admin.query({"topic": T, "key": "k", "max": api.QUERY_MAX})["ok"]
    assert admin.topic_status({"topic": "nope"})["code"] == "NOT_FOUND"
    assert admin.create_topic({"name": "x", "space_policy": "keep"})["code"] == "BAD_REQUEST"


@pytest.mark.parametrize("digits", ["\u00b2", "1\u00b2", "\u0663", "\uff13"], ids=["superscript", "mixed",
                                                                                    "arabic-indic", "fullwidth"])
def test_numbers_given_as_text_are_ascii_digits_or_a_typed_refusal(parts, digits):
    """CreateTopic's queues, ResetGroup's queue ids and Follow's port given as text: ASCII digits only.
    str.isdigit took a superscript two, which int() then refused (a ValueError the handlers answered
    BAD_REQUEST with Python's text); other scripts' digits, which int() reads, were taken (a Follow of
    "host:<arabic-indic 80>" kept that text as the leader's address). Each is a typed BAD_REQUEST,
    nothing made or moved."""
    from types import SimpleNamespace

    from tidemq.broker.admin import Admin, answer
    store, _offsets, _pop, _tmp = parts
    admin = Admin(store)

    def refused(fn, req):
        r = answer(fn, req)
        assert r["ok"] is False and r["code"] == api.Refusal.BAD_REQUEST.value, r
    refused(admin.create_topic, {"name": "Digits", "queues": digits})
    assert store.queue_count("Digits") == 0, "nothing was made"
    refused(admin.reset_group, {"group": "g", "topic": T, "offsets": {digits: 1}})
    node = SimpleNamespace(coordinator=None, endpoint="127.0.0.1:1")     # refused before it is asked anything
    admin_of_member = Admin(store, SimpleNamespace(replication=node))
    refused(admin_of_member.follow, {"leader": "127.0.0.1:" + digits})
    assert answer(admin.create_topic, {"name": "Digits", "queues": "3"})["queues"] == 3, "ASCII digits: taken"


@pytest.mark.parametrize("method", ["create", "update"])
def test_a_change_whose_directory_fsync_fails_is_neither_ok_nor_nothing_changed(tmp_path, method):
    """A directory fsync failing after the rename (FileIO seam): the change's durability is not known.
    The answer is STATE_NOT_DURABLE (not OK; not STATE_WRITE_FAILED's "nothing changed"), the change is
    not in effect and a read of the state finds the same (before: in memory the old settings, on disk
    the new ones, which the next start put in effect); the same request again is made, and stays."""
    fio = FaultyFileIO()
    d = str(tmp_path / "state")
    table = GroupTable(fio, d).load()
    if method == "update":
        assert answer(lambda r: group_admin.create(table, r), {"group": "g", "retry_max": 1})["ok"]
    call = getattr(group_admin, method)
    want = table.settings("g").retry_max
    fio.fail("fsync_dir", times=1)
    r = answer(lambda r: call(table, r), {"group": "g", "retry_max": 5})
    assert (r["ok"], r["code"]) == (False, api.Refusal.STATE_NOT_DURABLE.value), r
    assert table.settings("g").retry_max == want, "not in effect"
    assert GroupTable(fio, d).load().settings("g").retry_max == want, "what a read (the next start) finds"
    assert answer(lambda r: call(table, r), {"group": "g", "retry_max": 5})["ok"], "sent again: made"
    assert GroupTable(fio.after_crash(), d).load().settings("g").retry_max == 5
