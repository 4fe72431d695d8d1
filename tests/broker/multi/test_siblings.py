"""What a member of `serve --processes N` knows of the others: the queues' split, routes, the cluster's
topics made (never shrunk) and made local to a real store, a damaged file read as nothing."""

import json
import os

import pytest

from tidemq.broker.multi import (
    MEMBERS_FILE,
    TOPICS_FILE,
    member_root,
    multi_dir,
    owned_queues,
)
from tidemq.broker.multi.siblings import Siblings
from tidemq.store import MessageStore, StoreConfig


def write_members(root, endpoints):
    os.makedirs(multi_dir(str(root)), exist_ok=True)
    with open(os.path.join(multi_dir(str(root)), MEMBERS_FILE), "w") as fh:
        json.dump({"processes": len(endpoints), "members": [{"endpoint": e, "pid": 1} for e in endpoints]}, fh)


def test_owned_queues_split_q_mod_n():
    assert owned_queues(0, 2, 8) == (0, 2, 4, 6)
    assert owned_queues(1, 2, 8) == (1, 3, 5, 7)
    assert owned_queues(2, 3, 2) == ()                  # fewer queues than members: this one owns none
    assert sorted(q for i in range(3) for q in owned_queues(i, 3, 7)) == list(range(7))


def test_route_and_spread_of_a_topic_made_by_another_member(tmp_path):
    write_members(tmp_path, ["127.0.0.1:1000", "127.0.0.1:1001"])
    a, b = Siblings(str(tmp_path), 0, 2), Siblings(str(tmp_path), 1, 2)
    assert a.route("T") is None and a.spread("T") is None        # unknown: the member's own store answers
    assert b.create_topic("T", 4) == 4
    assert a.spread("T") == (4, (0, 2)) and b.spread("T") == (4, (1, 3))     # a sees it at once (a miss re-reads)
    r = a.route("T")
    assert [(v["leader"], q) for v, q in r] == [("127.0.0.1:1000", [0, 2]), ("127.0.0.1:1001", [1, 3])]
    assert [v["group"] for v, _ in r] == ["tidemq-p0", "tidemq-p1"]


def test_a_topic_grows_and_never_shrinks(tmp_path):
    write_members(tmp_path, ["h:1", "h:2"])
    s = Siblings(str(tmp_path), 0, 2)
    assert s.create_topic("T", 4) == 4
    assert s.create_topic("T", 2) == 4
    assert s.create_topic("T", 6) == 6
    with open(os.path.join(multi_dir(str(tmp_path)), TOPICS_FILE)) as fh:
        assert json.load(fh) == {"topics": {"T": 6}}


def test_no_route_until_every_member_is_known(tmp_path):
    write_members(tmp_path, ["h:1"])                    # the parent has not written both members yet
    s = Siblings(str(tmp_path), 0, 2)
    s.create_topic("T", 4)
    assert s.route("T") is None
    assert s.spread("T") == (4, (0, 2))


def test_a_damaged_topics_file_is_read_as_no_topics(tmp_path):
    write_members(tmp_path, ["h:1", "h:2"])
    with open(os.path.join(multi_dir(str(tmp_path)), TOPICS_FILE), "wb") as fh:
        fh.write(b'{"topics": {"T": 4, "U": -1, "V": "x"')        # torn
    s = Siblings(str(tmp_path), 0, 2)
    assert s.topics == {} and s.route("T") is None
    with open(os.path.join(multi_dir(str(tmp_path)), TOPICS_FILE), "w") as fh:
        json.dump({"topics": {"T": 4, "U": -1, "V": "x", "W": True, "X": 10**9}}, fh)
    s.reload(force=True)
    assert s.topics == {"T": 4}                            # only what is a topic and a queue count


def test_bad_member_index_is_refused(tmp_path):
    with pytest.raises(ValueError):
        Siblings(str(tmp_path), 2, 2)


def test_attach_makes_the_cluster_topics_local_with_the_owned_queues(tmp_path):
    write_members(tmp_path, ["h:1", "h:2"])
    Siblings(str(tmp_path), 0, 2).create_topic("T", 4)
    store = MessageStore(StoreConfig(root_dir=member_root(str(tmp_path), 1), segment_size_bytes=1 << 20,
                                     index_slots=100, index_entries=400)).start()
    s = Siblings(str(tmp_path), 1, 2)
    try:
        s.attach(store)
        assert store.queue_count("T") == 4 and tuple(store.write_queues("T")) == (1, 3)
        s.create_topic("T", 6)                              # grown here: made local at once
        assert store.queue_count("T") == 6 and tuple(store.write_queues("T")) == (1, 3, 5)
    finally:
        s.close()
        store.shutdown()
