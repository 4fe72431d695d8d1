"""put_encoded (the broker's raw send path: properties encoded by the caller) writes the same
records as put_batch, with the same refusals; get_raw skips holes and reports what it skipped."""

from tidemq.store import GetStatus, Message, MessageStore, PutStatus
from tidemq.record import codec

from ..support.store import lose_message


def props(tags=None, keys=None, uniq=None, **user) -> bytes:
    p = dict(user)
    if tags:
        p["TAGS"] = tags
    if keys:
        p["KEYS"] = " ".join(keys)
    if uniq:
        p["UNIQ_KEY"] = uniq
    return codec.encode_properties(p)


def test_records_match_put_batch_and_verify(store: MessageStore):
    store.create_topic("T", 2)
    a = store.put_batch([Message("T", b"body-%d" % i, tags="tg", keys=["k%d" % i], properties={"UNIQ_KEY": "u%d" % i,
                                                                                               "x": "1"})
                         for i in range(4)])
    b = store.put_encoded("T", [(b"body-%d" % i, props("tg", ["k%d" % i], "v%d" % i, x="1")) for i in range(4)])
    assert all(r.ok for r in a + b)
    assert [r.uniq_key for r in b] == ["v0", "v1", "v2", "v3"]
    assert [(r.queue_id, r.queue_offset) for r in b] == [(0, 2), (1, 2), (0, 3), (1, 3)]   # round-robin goes on
    g = store.get("g", "T", 0, 2, max_count=8)
    m = g.messages[0]
    assert (m.body, m.tags, m.keys, m.msg_id, m.properties["x"]) == (b"body-0", "tg", ["k0"], "v0", "1")
    assert [x.body for x in store.get("g", "T", 0, 0, max_count=8, tags=["tg"]).messages] == [b"body-0", b"body-2"] * 2
    assert [m.body for m in store.query_by_key("T", "v3")] == [b"body-3"]        # unique key indexed
    assert [m.body for m in store.query_by_key("T", "k1")] == [b"body-1", b"body-1"]
    assert store.check().ok                                                    # record CRCs verify


def test_refusals_are_per_message(make_config, open_store):
    s = open_store(make_config(message_body_bytes_max=100, auto_create_topics=False))
    assert [r.status for r in s.put_encoded("Nope", [(b"x", b"")] * 2)] == [PutStatus.TOPIC_NOT_FOUND] * 2
    assert s.put_encoded("bad topic!", [(b"x", b"")])[0].status is PutStatus.MESSAGE_ILLEGAL
    s.create_topic("T", 1)
    big_props = codec.encode_properties({"p": "v" * 33000})
    rs = s.put_encoded("T", [(b"ok", b""), (b"x" * 101, b""),
                             (b"ok2", big_props), (bytearray(b"no"), b"")])
    assert [r.status for r in rs] == [PutStatus.PUT_OK, PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED,
                                      PutStatus.MESSAGE_ILLEGAL]
    assert "exceeds message_body_bytes_max=100" in rs[1].error
    assert [r.queue_offset for r in rs if r.ok] == [0]
    s.refusal = "test refusal"
    assert s.put_encoded("T", [(b"x", b"")])[0].status is PutStatus.SERVICE_NOT_AVAILABLE
    s.refusal = None


def test_auto_create(make_config, open_store):
    s = open_store(make_config(auto_create_topics=True, topic_queues_default=3))
    assert s.put_encoded("New", [(b"x", b"")])[0].ok
    assert s.queue_count("New") == 3


def test_get_raw_skips_holes_and_says_where_the_queue_is(store: MessageStore):
    store.create_topic("H", 1)
    assert all(r.ok for r in store.put_batch([Message("H", b"m%d" % i) for i in range(6)]))
    lose_message(store, "H", 0, 2)                                # a hole: a lost message's unit
    g = store.get_raw("H", 0, 0, max_count=10)
    assert g.status is GetStatus.FOUND and g.next_offset == 6 and (g.min_offset, g.max_offset) == (0, 6)
    sizes, data = g.records
    bodies, pos = [], 0
    for size in sizes:
        bodies.append(codec.decode_record(data, pos, size).body)
        pos += size
    assert bodies == [b"m0", b"m1", b"m3", b"m4", b"m5"]
    assert store.get_raw("H", 0, 6).status is GetStatus.OFFSET_OVERFLOW_ONE
    assert store.get_raw("H", 0, 9).status is GetStatus.OFFSET_OVERFLOW_BADLY
    assert store.get_raw("H", 1, 0).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    only_hole = store.get_raw("H", 0, 2, max_count=1)
    assert only_hole.status is not GetStatus.FOUND and only_hole.next_offset == 3   # the reader moves past it


def test_born_fields_are_every_entrys_and_checked_as_put_batch_checks_them(store: MessageStore):
    store.create_topic("T", 1)
    r = store.put_encoded("T", [(b"a", b""), (b"b", b"")], born_ms=-5,
                          born_host="10.0.0.9:0", sys_flag=1)
    assert [x.ok for x in r] == [True, True]
    got = store.get("g", "T", 0, 0).messages
    assert [(m.body, m.born_timestamp_ms, m.born_host, m.sys_flag) for m in got] == [
        (b"a", -5, "10.0.0.9:0", 1), (b"b", -5, "10.0.0.9:0", 1)]
    same = store.put_batch([Message("T", b"a", born_timestamp_ms=-5, born_host="10.0.0.9:0", sys_flag=1)])
    assert same[0].ok                                   # put_batch takes the same fields
    port_past_i32 = store.put_batch([Message("T", b"c", born_host="10.0.0.9:4294967296")])[0]
    assert port_past_i32.status is PutStatus.MESSAGE_ILLEGAL and port_past_i32.reason.name == "BAD_FIELD"
    for bad in (dict(born_host="client.example"), dict(born_host="10.0.0.9:4294967296"), dict(born_ms=1 << 63),
                dict(sys_flag=1 << 31), dict(born_ms="now")):
        refused = store.put_encoded("T", [(b"c", b"")], **bad)
        assert refused[0].status is PutStatus.MESSAGE_ILLEGAL and refused[0].reason.name == "BAD_FIELD", bad
    assert store.max_offset("T", 0) == 3                # none of the refused ones is stored
