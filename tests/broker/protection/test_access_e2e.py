"""Authorization end to end, through a real broker with authentication on: users made with the admin
service (signed by the broker's own super user), policies granted and revoked while it runs, and
every RPC family called as a user who may and as one who may not, with the official Python client
(its ``Credentials(ak, sk)``) where it speaks the RPC, tidemq.client and raw stubs for the rest.

One broker for the whole matrix (its start is the slow part). The users:

    app-a  NORMAL  topic:orders* pub,sub,create; group:billing* sub; deny topic:orders-secret sub;
                   deny topic:orders-ro pub
    app-b  NORMAL  topic:junk pub,sub; group:billing-1 sub (it may consume the group, not orders)
    ops    NORMAL  cluster get,list; topic:* get
    star   NORMAL  topic:* all; group:* all
    tidemq-ak      the broker's own (SUPER)
"""

import json
import time

import grpc
import pytest

from tidemq.client import ClientError, Producer, PullConsumer, admin
from tidemq.protocol.signing import date_time, signed_metadata
from tidemq.protocol.stubs import Code, pb, sgrpc, spb

from ...support.auth import AUTH
from ...support.brokers import brokers, free_port, make_topic
from ...support.official import REQUEST_TIMEOUT_S, msg, receive_all, start
from ...support.scrape import scrape

SUPER = ("tidemq-ak", "s3cret-sk")
KEYS = {"app-a": "secret-of-app-a", "app-b": "secret-of-app-b", "ops": "secret-of-ops", "star": "secret-of-star"}


def md(user):
    ak, sk = SUPER if user == "super" else (user, KEYS[user])
    return signed_metadata(ak, sk, date_time(time.time()))


def call(b, method, request=None, user="super"):
    return admin.call(b.endpoint, method, request or {}, timeout_s=60.0, metadata=md(user))


def ok(r):
    assert r["ok"], r
    return r


def forbidden(r, *words):
    assert (r["ok"], r["code"]) == (False, "FORBIDDEN"), r
    for w in words:
        assert w in r["error"], (w, r["error"])


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("access") / "store")
    for t in ("orders-1", "orders-secret", "orders-ro", "junk", "other"):
        make_topic(root, t, 2)
    with brokers(root) as start_broker:
        b = start_broker(env={**AUTH, "TIDEMQ_METRICS_PORT": str(free_port())})
        ok(call(b, "CreateUser", {"name": "app-a", "secret_key": KEYS["app-a"]}))
        ok(call(b, "Grant", {"user": "app-a", "resource": "topic:orders*", "actions": ["pub", "sub", "create"]}))
        ok(call(b, "Grant", {"user": "app-a", "resource": "group:billing*", "actions": ["sub"]}))
        ok(call(b, "Grant", {"user": "app-a", "resource": "topic:orders-secret", "actions": ["sub"],
                             "decision": "deny"}))
        ok(call(b, "Grant", {"user": "app-a", "resource": "topic:orders-ro", "actions": ["pub"], "decision": "deny"}))
        ok(call(b, "CreateUser", {"name": "app-b", "secret_key": KEYS["app-b"]}))
        ok(call(b, "Grant", {"user": "app-b", "resource": "topic:junk", "actions": ["pub", "sub"]}))
        ok(call(b, "Grant", {"user": "app-b", "resource": "group:billing-1", "actions": ["sub"]}))
        ok(call(b, "CreateUser", {"name": "ops", "secret_key": KEYS["ops"]}))
        ok(call(b, "Grant", {"user": "ops", "resource": "cluster", "actions": ["get", "list"]}))
        ok(call(b, "Grant", {"user": "ops", "resource": "topic:*", "actions": ["get"]}))
        ok(call(b, "CreateUser", {"name": "star", "secret_key": KEYS["star"]}))
        ok(call(b, "Grant", {"user": "star", "resource": "topic:*", "actions": ["all"]}))
        ok(call(b, "Grant", {"user": "star", "resource": "group:*", "actions": ["all"]}))
        yield b


def official_producer(b, user, topic):
    from rocketmq import ClientConfiguration, Credentials, Producer as OfficialProducer
    ak, sk = (user, KEYS[user])
    conf = ClientConfiguration(b.endpoint, Credentials(ak, sk), request_timeout=REQUEST_TIMEOUT_S)
    return start(lambda: OfficialProducer(conf, (topic,)))


def official_consumer(b, user, group, topic):
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer
    conf = ClientConfiguration(b.endpoint, Credentials(user, KEYS[user]), request_timeout=REQUEST_TIMEOUT_S)
    return start(lambda: SimpleConsumer(conf, group, {topic: FilterExpression("*")}, await_duration=1))


def test_sends_and_receives_with_the_official_client(secured):
    """SendMessage: pub on the topic; ReceiveMessage / AckMessage: sub on the topic and the group; deny
    wins over the prefix's allow; a prefix pattern covers names it starts."""
    from rocketmq.v5.exception import ForbiddenException
    b = secured
    p = official_producer(b, "app-a", "orders-1")
    c = official_consumer(b, "app-a", "billing-1", "orders-1")
    try:
        sent = {p.send(msg("orders-1", b"a%d" % i)).message_id for i in range(3)}
        got = receive_all(c, 3)
        assert {m.message_id for m in got} == sent
        for m in got:
            c.ack(m)
        # a topic it may sub but not pub: its route is served, its send refused
        with pytest.raises(ForbiddenException, match="'app-a' may not pub on topic 'orders-ro'"):
            p.send(msg("orders-ro", b"never"))
        with pytest.raises(Exception, match="failed to fetch topic:junk route"):     # neither pub nor sub:
            p.send(msg("junk", b"never"))                                          # its route is refused
    finally:
        c.shutdown()
        p.shutdown()
    for group, topic, words in (("other-group", "orders-1", "may not sub on group 'other-group'"),
                                ("billing-1", "orders-secret", "denied by its policy on topic:orders-secret")):
        c = official_consumer(b, "app-a", group, topic)
        try:
            with pytest.raises(ForbiddenException, match=words):
                c.receive(1, 30)
        finally:
            c.shutdown()
    pb_ = official_producer(b, "app-b", "junk")
    try:
        pb_.send(msg("junk", b"b0"))
        with pytest.raises(Exception, match="failed to fetch topic:orders-1 route"):
            pb_.send(msg("orders-1", b"never"))
    finally:
        pb_.shutdown()
    s = official_producer(b, "star", "other")           # topic:* : every topic
    try:
        assert s.send(msg("other", b"s0")).message_id
    finally:
        s.shutdown()


def test_every_messaging_rpc_family(secured):
    """Each RPC as a user with the permission (served: past the guard) and one without (FORBIDDEN,
    naming user, action, resource); the receipt handle is bound to the topic its caller was checked on."""
    b = secured
    T = pb.Resource(name="orders-1")
    G = pb.Resource(name="billing-1")
    mq = pb.MessageQueue(topic=T, id=0)
    with grpc.insecure_channel(b.endpoint) as ch:
        s = sgrpc.MessagingServiceStub(ch)

        def code(rpc, req, user):
            r = getattr(s, rpc)(req, metadata=md(user), timeout=60)
            if rpc in ("ReceiveMessage", "PullMessage"):
                r = list(r)[0]
            return r.status.code, r.status.message

        def refused(rpc, req, user, *words):
            c, text = code(rpc, req, user)
            assert c == Code.FORBIDDEN, (rpc, user, c, text)
            assert all(w in text for w in words), (rpc, text)

        def served(rpc, req, user, *codes):
            c, text = code(rpc, req, user)
            assert c in (codes or (Code.OK,)), (rpc, user, c, text)

        served("QueryRoute", spb.QueryRouteRequest(topic=T), "app-a")
        refused("QueryRoute", spb.QueryRouteRequest(topic=T), "app-b", "'app-b'", "pub", "orders-1")
        served("QueryAssignment", spb.QueryAssignmentRequest(topic=T, group=G), "app-a")
        refused("QueryAssignment", spb.QueryAssignmentRequest(topic=T, group=G), "app-b", "sub", "orders-1")
        for user in ("app-a", "app-b", "ops"):
            served("Heartbeat", spb.HeartbeatRequest(group=G), user)
        # one request, two topics: each message answered as its topic allows
        two = spb.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name=t), body=b"x", system_properties=
                                                          pb.SystemProperties(message_id=f"0A{i}",
                                                                              message_type=pb.MessageType.NORMAL))
                                               for i, t in enumerate(("orders-1", "junk"))])
        r = s.SendMessage(two, metadata=md("app-a"), timeout=60)
        assert [e.status.code for e in r.entries] == [Code.OK, Code.FORBIDDEN] and r.status.code == Code.MULTIPLE_RESULTS
        served("EndTransaction", spb.EndTransactionRequest(topic=T, transaction_id="x", message_id="m"), "app-a",
               Code.INVALID_TRANSACTION_ID)
        refused("EndTransaction", spb.EndTransactionRequest(topic=T, transaction_id="x"), "app-b", "pub")
        served("RecallMessage", spb.RecallMessageRequest(topic=T, recall_handle="x"), "app-a", Code.BAD_REQUEST)
        refused("RecallMessage", spb.RecallMessageRequest(topic=T, recall_handle="x"), "app-b", "pub", "orders-1")
        lite = spb.SyncLiteSubscriptionRequest(topic=T, group=G, lite_topic_set=["s1"])
        served("SyncLiteSubscription", lite, "app-a", Code.CLIENT_ID_REQUIRED)   # past the guard (no client id)
        refused("SyncLiteSubscription", lite, "app-b", "sub", "orders-1")
        served("PullMessage", spb.PullMessageRequest(group=G, message_queue=mq, offset=0, batch_size=1), "app-a")
        refused("PullMessage", spb.PullMessageRequest(group=G, message_queue=mq), "app-b", "sub", "orders-1")
        refused("PullMessage", spb.PullMessageRequest(message_queue=mq), "ops", "'ops' may not sub")
        served("QueryOffset", spb.QueryOffsetRequest(message_queue=mq), "app-a")
        refused("QueryOffset", spb.QueryOffsetRequest(message_queue=mq), "app-b")
        served("UpdateOffset", spb.UpdateOffsetRequest(group=G, message_queue=mq, offset=1), "app-a")
        refused("UpdateOffset", spb.UpdateOffsetRequest(group=G, message_queue=mq, offset=0), "app-b")
        served("GetOffset", spb.GetOffsetRequest(group=G, message_queue=mq), "app-a")
        refused("GetOffset", spb.GetOffsetRequest(group=G, message_queue=mq), "ops")
        # pop: a handle app-a received; app-b may consume billing-1 but not orders-1
        s.SendMessage(spb.SendMessageRequest(messages=[pb.Message(topic=T, body=b"h", system_properties=
                                                                  pb.SystemProperties(message_id="0B1",
                                                                                      message_type=pb.MessageType.NORMAL))]),
                      metadata=md("app-a"), timeout=60)
        got = [r for r in s.ReceiveMessage(spb.ReceiveMessageRequest(
            group=G, message_queue=pb.MessageQueue(topic=T), batch_size=8, invisible_duration={"seconds": 300},
            long_polling_timeout={"seconds": 5}), metadata=md("app-a"), timeout=60) if r.HasField("message")]
        assert got, "app-a receives"
        handle = got[0].message.system_properties.receipt_handle
        refused("ReceiveMessage", spb.ReceiveMessageRequest(group=G, message_queue=pb.MessageQueue(topic=T)),
                "app-b", "sub", "orders-1")
        change = lambda topic: spb.ChangeInvisibleDurationRequest(  # noqa: E731
            group=G, topic=topic, receipt_handle=handle, invisible_duration={"seconds": 300}, message_id="m")
        refused("ChangeInvisibleDuration", change(T), "app-b")
        # app-b may sub on junk and on billing-1: naming junk with orders-1's handle is caught by the handle
        served("ChangeInvisibleDuration", change(pb.Resource(name="junk")), "app-b", Code.INVALID_RECEIPT_HANDLE)
        r = s.ChangeInvisibleDuration(change(T), metadata=md("app-a"), timeout=60)
        assert r.status.code == Code.OK
        handle = r.receipt_handle
        ack = lambda topic: spb.AckMessageRequest(group=G, topic=topic, entries=[  # noqa: E731
            spb.AckMessageEntry(message_id="m", receipt_handle=handle)])
        refused("AckMessage", ack(T), "app-b")
        served("AckMessage", ack(pb.Resource(name="junk")), "app-b", Code.INVALID_RECEIPT_HANDLE)
        dlq = spb.ForwardMessageToDeadLetterQueueRequest(group=G, topic=T, receipt_handle=handle, message_id="m")
        refused("ForwardMessageToDeadLetterQueue", dlq, "app-b")
        served("AckMessage", ack(T), "app-a")
        # Telemetry: any user (settings only)
        tele = s.Telemetry(iter([spb.TelemetryCommand(settings=pb.Settings(client_type=pb.ClientType.PRODUCER))]),
                           metadata=md("app-b"), timeout=60)
        assert next(tele).status.code == Code.OK
        tele.cancel()


def test_tidemq_data_lanes(secured):
    """SendRecords: pub per topic (the send path); PullRecords: sub on the topic."""
    b = secured
    with Producer(b.endpoint, access_key="app-a", secret_key=KEYS["app-a"]) as p:
        assert p.send_batch("orders-1", [b"r1", b"r2"]).all_ok()
        refused = p.send_batch("junk", [b"x"])
        assert [r.code for r in refused] == [Code.FORBIDDEN] and "may not pub on topic 'junk'" in refused[0].error
    with PullConsumer(b.endpoint, access_key="app-a", secret_key=KEYS["app-a"]) as c:
        assert c.pull_records("orders-1", 0, 0).code in (Code.OK, Code.ILLEGAL_OFFSET, Code.MESSAGE_NOT_FOUND)
    with PullConsumer(b.endpoint, access_key="app-b", secret_key=KEYS["app-b"]) as c:
        with pytest.raises(ClientError, match="FORBIDDEN: forbidden: user 'app-b' may not sub on topic 'orders-1'"):
            c.pull_records("orders-1", 0, 0)


def test_every_admin_method(secured):
    """Each admin method refused for a user without its permission and served for one with it; users
    and ACLs for super users only."""
    b = secured
    ok(call(b, "ListTopics", user="ops"))
    forbidden(call(b, "ListTopics", user="app-a"), "'app-a' may not list on cluster")
    for m in ("Status", "DiskStatus", "Alarms", "Config", "Archive", "Replication", "Groups"):
        assert call(b, m, user="ops")["ok"] or m == "Cluster", m
        forbidden(call(b, m, user="app-b"), "may not")
    ok(call(b, "TopicStatus", {"topic": "orders-1"}, user="ops"))
    forbidden(call(b, "TopicStatus", {"topic": "orders-1"}, user="app-b"), "get")
    ok(call(b, "Query", {"topic": "orders-1", "queue": 0, "timestamp_ms": 0}, user="app-a"))
    forbidden(call(b, "Query", {"topic": "orders-1", "key": "k"}, user="ops"), "'ops' may not sub")
    ok(call(b, "Groups", {"group": "billing-1"}, user="star"))
    forbidden(call(b, "Groups", {"group": "billing-1"}, user="app-a"), "get on group 'billing-1'")
    ok(call(b, "CreateTopic", {"name": "orders-new"}, user="app-a"))
    forbidden(call(b, "CreateTopic", {"name": "junk2"}, user="app-a"), "create on topic 'junk2'")
    forbidden(call(b, "DeleteTopic", {"topic": "orders-new"}, user="app-a"), "delete")
    ok(call(b, "DeleteTopic", {"topic": "orders-new"}, user="star"))
    forbidden(call(b, "ResetGroup", {"group": "billing-1", "topic": "orders-1", "to": "latest"}, user="app-a"),
              "update on group 'billing-1'")
    ok(call(b, "ResetGroup", {"group": "billing-1", "topic": "orders-1", "to": "latest", "force": True}, user="star"))
    for m, req in (("SetAlarmLimits", {"disk_free_limit_bytes": 1}), ("DeleteExpired", {}), ("Promote", {})):
        forbidden(call(b, m, req, user="ops"), "'ops' may not update on cluster")
    forbidden(call(b, "Follow", {"leader": "127.0.0.1:1"}, user="star"), "for super users")
    ok(call(b, "DeleteExpired", {}, user="super"))
    for m, req in (("CreateUser", {"name": "x-user", "secret_key": "12345678"}), ("DeleteUser", {"name": "app-b"}),
                   ("ListUsers", {}), ("Grant", {"user": "app-a", "resource": "cluster", "actions": ["all"]}),
                   ("Revoke", {"user": "app-a", "resource": "topic:orders*", "actions": ["pub"]}), ("ListAcl", {})):
        forbidden(call(b, m, req, user="star"), "for super users")
    users = {u["name"]: u["super"] for u in ok(call(b, "ListUsers"))["users"]}
    assert users == {"tidemq-ak": True, "app-a": False, "app-b": False, "ops": False, "star": False}
    assert "secret" not in json.dumps(call(b, "ListUsers")) .replace("secret_key", "")  # no secret is answered
    pol = ok(call(b, "ListAcl", {"user": "app-a"}))["policies"]["app-a"]
    assert {"resource": "topic:orders-secret", "actions": ["sub"], "decision": "deny", "source_ips": []} in pol


def test_group_settings_methods_need_create_update_delete_on_the_group(secured):
    """CreateGroup / UpdateGroup / DeleteGroup (consume/group_admin.py): group:G create, update, delete."""
    b = secured
    forbidden(call(b, "CreateGroup", {"group": "billing-9", "retry_max": 2}, user="app-a"),
              "'app-a' may not create on group 'billing-9'")
    forbidden(call(b, "CreateGroup", {"group": "billing-9"}, user="ops"), "create on group")
    ok(call(b, "CreateGroup", {"group": "billing-9", "retry_max": 2}, user="star"))
    forbidden(call(b, "UpdateGroup", {"group": "billing-9", "orderly": True}, user="app-a"),
              "update on group 'billing-9'")
    assert ok(call(b, "UpdateGroup", {"group": "billing-9", "orderly": True}, user="star"))["settings"]["orderly"]
    forbidden(call(b, "DeleteGroup", {"group": "billing-9"}, user="app-b"), "delete on group 'billing-9'")
    ok(call(b, "DeleteGroup", {"group": "billing-9"}, user="star"))


def test_run_time_settings_topic_settings_and_quotas_are_guarded(secured):
    """SetConfig and SetQuota need update on the cluster, ListQuotas get; TopicConfig get (show) or
    update (set) on the topic."""
    b = secured
    forbidden(call(b, "SetConfig", {"name": "send_hold_ms_max", "value": 1000}, user="star"),
              "'star' may not update on cluster")
    forbidden(call(b, "SetConfig", {"name": "send_hold_ms_max", "value": 1000}, user="ops"), "update on cluster")
    ok(call(b, "SetConfig", {"name": "send_hold_ms_max", "value": 2000}, user="super"))
    ok(call(b, "TopicConfig", {"topic": "orders-1"}, user="ops"))
    forbidden(call(b, "TopicConfig", {"topic": "orders-1", "set": {"retention_hours": 1}}, user="ops"),
              "'ops' may not update on topic 'orders-1'")
    forbidden(call(b, "TopicConfig", {"topic": "orders-1"}, user="app-b"), "get on topic 'orders-1'")
    ok(call(b, "TopicConfig", {"topic": "orders-1", "set": {"retention_hours": 1}}, user="star"))
    ok(call(b, "TopicConfig", {"topic": "orders-1", "set": {"retention_hours": None}}, user="star"))
    forbidden(call(b, "SetQuota", {"user": "app-a", "produce_bytes_per_s": 1}, user="star"), "update on cluster")
    forbidden(call(b, "ListQuotas", {}, user="app-b"), "'app-b' may not get on cluster")
    ok(call(b, "ListQuotas", {}, user="ops"))
    ok(call(b, "SetQuota", {"user": "app-a", "produce_bytes_per_s": 0}, user="super"))


def test_changes_take_effect_at_once_without_a_restart(secured):
    """Revoke: the next call is refused; a deleted user is unknown (UNAUTHORIZED); a source-address
    condition; the refusals are counted (tidemq_auth_failures_total{reason})."""
    b = secured
    ok(call(b, "CreateUser", {"name": "temp", "secret_key": "secret-of-temp"}))
    KEYS["temp"] = "secret-of-temp"
    ok(call(b, "Grant", {"user": "temp", "resource": "topic:other", "actions": ["pub"],
                         "source_ips": ["10.0.0.0/8"]}))
    with Producer(b.endpoint, access_key="temp", secret_key=KEYS["temp"]) as p:
        assert [r.code for r in p.send_batch("other", [b"x"])] == [Code.FORBIDDEN], "not from 127.0.0.1"
        ok(call(b, "Grant", {"user": "temp", "resource": "topic:other", "actions": ["pub"],
                             "source_ips": ["127.0.0.1/32"]}))
        assert p.send_batch("other", [b"x"]).all_ok()
        ok(call(b, "Revoke", {"user": "temp", "resource": "topic:other", "actions": ["pub"]}))
        r = p.send_batch("other", [b"x"])
        assert [x.code for x in r] == [Code.FORBIDDEN], "revoked: the very next send"
        ok(call(b, "DeleteUser", {"name": "temp"}))
        with pytest.raises(ClientError, match="UNAUTHORIZED: unauthorized: unknown access key"):
            p.send_batch("other", [b"x"])
    m = scrape(b.metrics_port)
    assert m[("tidemq_auth_failures_total", (("reason", "forbidden"),))] >= 3
    assert m[("tidemq_auth_failures_total", (("reason", "unknown_key"),))] >= 1


def test_every_change_is_audited_and_every_refusal_logged_with_its_peer(secured):
    """INFO tidemq.audit: who (the access key), from where, what (secret keys masked); WARNING for
    refusals, with the peer and the access key (read from the broker's log once it stopped)."""
    b = secured
    assert b.stop() == 0
    log = b.proc.stderr.read()
    created = [line for line in log.splitlines() if "audit: tidemq-ak from ipv4:127.0.0.1:" in line
               and "CreateUser" in line and '"app-a"' in line]
    assert created and '"secret_key": "***"' in created[0] and KEYS["app-a"] not in log
    assert any("audit: app-a from ipv4:127.0.0.1:" in line and "CreateTopic" in line for line in log.splitlines())
    assert any("audit: tidemq-ak" in line and "Revoke" in line for line in log.splitlines())
    refused = [line for line in log.splitlines() if "WARNING" in line and "refused" in line and "forbidden" in line]
    assert any("from ipv4:127.0.0.1:" in line and "access key 'app-b'" in line for line in refused), refused[:5]
