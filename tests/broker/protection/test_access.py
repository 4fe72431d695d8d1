"""Every method of every service the broker serves has its rule: a new RPC cannot be served without
one being written (a method without a rule is for super users only: the guard fails closed)."""

from tidemq.broker.protection import access
from tidemq.protocol import admin as api
from tidemq.protocol import data
from tidemq.protocol import replication as rp


def test_every_method_has_a_rule():
    assert access.messaging_rule_names() == set(access.MESSAGING_RULES)
    assert set(access.ADMIN_RULES) == set(api.METHODS)
    assert set(access.DATA_RULES) == {data.SEND_RECORDS, data.SEND_RECORDS_STREAM, data.PULL_RECORDS,
                                      data.PULL_RECORDS_STREAM}
    for m in (rp.STREAM, rp.EPOCHS, rp.STATE):
        assert access.RULES[f"/{rp.SERVICE}/{m}"] is access.SUPER


def test_user_and_acl_methods_and_replication_are_for_super_users():
    for m in (api.CREATE_USER, api.DELETE_USER, api.LIST_USERS, api.GRANT, api.REVOKE, api.LIST_ACL):
        assert access.ADMIN_RULES[m] is access.SUPER


class _Acl:
    """Only 'root' is super; 'u' may sub on topic t (anything else: refused)."""
    def is_super(self, user):
        return user == "root"

    def allowed_any(self, user, kind, name, actions, ip=None):
        if user == "u" and kind == "topic" and name == "t" and "sub" in actions:
            return True, ""
        return False, f"forbidden: {user} {kind} {name}"


def test_a_method_without_a_rule_or_a_request_that_cannot_be_read_fails_closed():
    g = access.Guard([], None, _Acl(), None)
    assert g.check("/unknown.Service/Do", None, "u", "") is not None
    assert g.check("/unknown.Service/Do", None, "root", "") is None
    assert g.check(access.MESSAGING + "QueryRoute", object(), "u", "").startswith("forbidden: cannot tell")
    assert g.check(f"/{rp.SERVICE}/{rp.STREAM}", None, "u", "") is not None
    pull = f"/{data.SERVICE}/{data.PULL_RECORDS}"
    assert g.check(pull, b'{"topic": "t", "queue_id": 0, "offset": 0}', "u", "") is None
    assert g.check(pull, b'{"topic": "x", "queue_id": 0, "offset": 0}', "u", "") == "forbidden: u topic x"
    assert g.check(pull, b"not a frame", "u", "") is None, "its handler answers BAD_REQUEST, reading nothing"


def test_every_kind_of_call_is_served_refused_or_unauthenticated_by_the_guard(tmp_path):
    """The guard over a real gRPC server, for the four kinds of call (a service without rules: super
    users only; no answer of its own: refused with a gRPC status): the super user is served, another
    user gets PERMISSION_DENIED and an unsigned call UNAUTHENTICATED, before any handler runs."""
    import asyncio
    import time

    import grpc

    from tidemq.broker.protection.acl import Acl, User
    from tidemq.broker.protection.auth import Authenticator, Refusals
    from tidemq.io import OsFileIO
    from tidemq.protocol.signing import date_time, signed_metadata

    acl = Acl(OsFileIO(), str(tmp_path), User("root", "root-secret-key", True)).load()
    acl.create_user("u", "u-secret-key")
    ran = []

    async def uu(request, context):
        ran.append("uu")
        return b"uu:" + request

    async def us(request, context):               # an async generator
        ran.append("us")
        yield b"us:" + request

    async def su(requests, context):
        ran.append("su")
        return b"su:" + b"".join([r async for r in requests])

    async def ss(requests, context):              # reads and writes itself
        ran.append("ss")
        await context.write(b"ss:" + await context.read())

    generic = grpc.method_handlers_generic_handler("tidemq.Test", {
        "UU": grpc.unary_unary_rpc_method_handler(uu), "US": grpc.unary_stream_rpc_method_handler(us),
        "SU": grpc.stream_unary_rpc_method_handler(su), "SS": grpc.stream_stream_rpc_method_handler(ss)})
    guard = access.Guard([generic], Authenticator(acl.secret_of), acl, Refusals())

    async def outcomes(channel, metadata):
        calls = {"UU": lambda: channel.unary_unary("/tidemq.Test/UU")(b"x", metadata=metadata, timeout=60),
                 "US": lambda: _first(channel.unary_stream("/tidemq.Test/US")(b"x", metadata=metadata, timeout=60)),
                 "SU": lambda: channel.stream_unary("/tidemq.Test/SU")(iter([b"x"]), metadata=metadata, timeout=60),
                 "SS": lambda: _first(channel.stream_stream("/tidemq.Test/SS")(iter([b"x"]), metadata=metadata,
                                                                              timeout=60))}
        out = {}
        for name, call in calls.items():
            try:
                out[name] = await call()
            except grpc.aio.AioRpcError as e:
                out[name] = e.code()
        return out

    async def _first(stream):
        async for item in stream:
            return item

    async def run():
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((guard,))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                now = date_time(time.time())
                return (await outcomes(channel, signed_metadata("u", "u-secret-key", now)),
                        await outcomes(channel, None),
                        await outcomes(channel, signed_metadata("root", "root-secret-key", now)))
        finally:
            await server.stop(None)

    forbidden, unsigned, served = asyncio.run(run())
    assert forbidden == dict.fromkeys(("UU", "US", "SU", "SS"), grpc.StatusCode.PERMISSION_DENIED)
    assert unsigned == dict.fromkeys(("UU", "US", "SU", "SS"), grpc.StatusCode.UNAUTHENTICATED)
    assert served == {"UU": b"uu:x", "US": b"us:x", "SU": b"su:x", "SS": b"ss:x"}
    assert ran == ["uu", "us", "su", "ss"], "a refused call never reaches its handler"


class _PubAcl:
    """'u' may pub on topic t and sub on group g and topic t; nothing else."""
    def allowed(self, user, kind, name, action, ip=None):
        ok = user == "u" and (kind, name, action) in {("topic", "t", "pub"), ("topic", "t", "sub"), ("group", "g", "sub")}
        return ok, "" if ok else f"forbidden: user {user!r} may not {action} on {kind} {name!r}"

    def allowed_any(self, user, kind, name, actions, ip=None):
        for a in actions:
            if self.allowed(user, kind, name, a, ip)[0]:
                return True, ""
        return self.allowed(user, kind, name, actions[0], ip)


def test_telemetry_settings_are_taken_as_far_as_their_user_may_declare_them():
    """A producer's declared topics (where orphan transaction checks go, bodies included) keep only
    the ones its user may pub; a lite consumer's settings (they make a group lite on a topic) need
    sub on the group and the topic, else FORBIDDEN; other settings are taken as they are."""
    from tidemq.protocol.stubs import pb
    acl = _PubAcl()
    prod = pb.Settings(client_type=pb.ClientType.PRODUCER, publishing=pb.Publishing(
        topics=[pb.Resource(name="t"), pb.Resource(name="secret")]))
    why, taken = access.vet_settings(acl, "u", "ipv4:127.0.0.1:5", prod)
    assert why is None and [r.name for r in taken.publishing.topics] == ["t"]
    assert [r.name for r in prod.publishing.topics] == ["t", "secret"], "the request itself is not changed"

    def lite(group, topic):
        return pb.Settings(client_type=pb.ClientType.LITE_PUSH_CONSUMER, subscription=pb.Subscription(
            group=pb.Resource(name=group), subscriptions=[pb.SubscriptionEntry(topic=pb.Resource(name=topic))]))
    assert access.vet_settings(acl, "u", "", lite("g", "t")) == (None, lite("g", "t"))
    for group, topic, word in (("other", "t", "group 'other'"), ("g", "secret", "topic 'secret'")):
        why, taken = access.vet_settings(acl, "u", "", lite(group, topic))
        assert taken is None and why.startswith("forbidden") and word in why
    simple = pb.Settings(client_type=pb.ClientType.SIMPLE_CONSUMER, subscription=pb.Subscription(
        group=pb.Resource(name="other")))
    assert access.vet_settings(acl, "u", "", simple) == (None, simple)


def test_the_system_topics_are_for_super_users_whatever_a_pattern_allows():
    """A user allowed everything on topic:* still may not touch the schedule or half topic (messages not
    due or not committed wait there): only super users (an operator's query)."""
    from tidemq.broker.topic_names import HALF_TOPIC, SCHEDULE_TOPIC

    class Everything(_Acl):
        def allowed_any(self, user, kind, name, actions, ip=None):
            return True, ""
    g = access.Guard([], None, Everything(), None)
    query = access.ADMIN_PREFIX + api.QUERY
    for topic in (SCHEDULE_TOPIC, HALF_TOPIC):
        why = g.check(query, {"topic": topic, "key": "k"}, "u", "")
        assert why is not None and "broker's own" in why
        assert g.check(query, {"topic": topic, "key": "k"}, "root", "") is None
    assert g.check(query, {"topic": "orders", "key": "k"}, "u", "") is None
