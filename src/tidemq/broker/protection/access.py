"""Who may call what: every RPC of every service of every port is authenticated and authorized here,
in one place (``Guard``), before its handler runs; sends are authorized per topic by the send path
(produce/send_path.py), with the identity the guard found.

With authentication off (no ``access_key``) there is no guard: every call is served, as on the
embedded loopback broker. With it on, a call is

1. **authenticated** (auth.py) from its headers, before its request is even decoded: an unsigned
   or wrongly signed call is answered **UNAUTHORIZED** (who you are), counted by reason
   (tidemq_auth_failures_total) and logged with the peer and the access key (rate-limited);
2. **authorized** (acl.py) by the rule of its method below: a call its user may not make is
   answered **FORBIDDEN** naming the user, the action and the resource (what you may do), counted
   (reason "forbidden") and logged the same way.

Each service answers a refusal the way it answers anything: the RocketMQ MessagingService in the
response's status (the official clients' codes UNAUTHORIZED 40100 / FORBIDDEN 40300; ReceiveMessage
and PullMessage as their one status message, Telemetry as one command), tidemq.Data in its frame's
code (the same numbers), tidemq.Admin with ``{"ok": false, "code": "UNAUTHORIZED" | "FORBIDDEN"}``,
tidemq.Replication (members only) with gRPC UNAUTHENTICATED / PERMISSION_DENIED.

What each RPC needs (any one of the actions listed, on every resource listed)::

    MessagingService
      QueryRoute                                 pub or sub on the topic
      QueryAssignment                            sub on the topic and on the group
      SendMessage (and tidemq.Data SendRecords,  pub on each message's topic (the send path: a
        SendRecordsStream)                         message to a topic the user may not pub is FORBIDDEN)
      EndTransaction, RecallMessage              pub on the topic
      ReceiveMessage, AckMessage,                sub on the topic and on the group (the receipt handle
        ChangeInvisibleDuration,                   must be of that topic: consume/pop_state.py)
        ForwardMessageToDeadLetterQueue,
        SyncLiteSubscription                       (the bind topic)
      PullMessage, GetOffset, UpdateOffset       sub on the topic and on the group (PullMessage
                                                   without a group: the topic)
      QueryOffset                                sub on the topic
      Heartbeat, Telemetry,                      any user
        NotifyClientTermination
    tidemq.Data PullRecords, PullRecordsStream   sub on the topic
    tidemq.Admin (ADMIN below)                   its action on its resource
    tidemq.Replication                           SUPER users (the members sign with the broker's keys)
"""

from __future__ import annotations

import contextvars
import inspect
import logging
from typing import Callable, NamedTuple

import grpc

from ...protocol import admin as api
from ...protocol import data
from ...protocol import replication as rp
from ...protocol.pull_frame import decode_request as decode_pull
from ...protocol.pull_frame import encode_response as encode_pull
from ...protocol.send_frame import encode_response as encode_send
from ...protocol.stubs import Code, spb, status
from ..topic_names import SYSTEM_TOPICS
from .acl import CLUSTER, Acl, peer_ip
from .auth import Authenticator, Failure, Refusals, Signed
from .decoding import undecodable
from .forwarded import ForwardedFor

log = logging.getLogger("tidemq.broker")

MESSAGING = "/apache.rocketmq.v2.MessagingService/"
ADMIN_PREFIX = f"/{api.SERVICE}/"


class Identity(NamedTuple):
    """Who makes the current call (authenticated): its user (access key) and address."""
    user: str
    peer: str


# the identity of the call being served (set by the guard for its handler; None: authentication off)
IDENTITY: contextvars.ContextVar[Identity | None] = contextvars.ContextVar("tidemq_identity", default=None)


class Need(NamedTuple):
    kind: str                # topic, group, cluster
    name: str                # "" for cluster
    actions: tuple           # any one of them


# rules: method -> what the call needs (a function of its decoded request), or one of these
ANYONE = "anyone"            # any authenticated user
SUPER = "super"              # super users only
SEND_PATH = "send path"      # pub per topic, checked by the send path (an identity is all it needs here)


def _topic(name, *actions) -> Need:
    return Need("topic", name if isinstance(name, str) else "", actions)


def _group(name, *actions) -> Need:
    return Need("group", name if isinstance(name, str) else "", actions)


def _cluster(*actions) -> Need:
    return Need(CLUSTER, "", actions)


def _sub_topic_group(topic: str, group: str) -> tuple:
    return (_topic(topic, "sub"), _group(group, "sub"))


MESSAGING_RULES: dict[str, object] = {
    "QueryRoute": lambda r: (_topic(r.topic.name, "pub", "sub"),),
    "QueryAssignment": lambda r: _sub_topic_group(r.topic.name, r.group.name),
    "SendMessage": SEND_PATH,
    "EndTransaction": lambda r: (_topic(r.topic.name, "pub"),),
    "RecallMessage": lambda r: (_topic(r.topic.name, "pub"),),
    "ReceiveMessage": lambda r: _sub_topic_group(r.message_queue.topic.name, r.group.name),
    "AckMessage": lambda r: _sub_topic_group(r.topic.name, r.group.name),
    "ChangeInvisibleDuration": lambda r: _sub_topic_group(r.topic.name, r.group.name),
    "ForwardMessageToDeadLetterQueue": lambda r: _sub_topic_group(r.topic.name, r.group.name),
    "PullMessage": lambda r: (_sub_topic_group(r.message_queue.topic.name, r.group.name) if r.group.name
                              else (_topic(r.message_queue.topic.name, "sub"),)),
    "GetOffset": lambda r: _sub_topic_group(r.message_queue.topic.name, r.group.name),
    "UpdateOffset": lambda r: _sub_topic_group(r.message_queue.topic.name, r.group.name),
    "QueryOffset": lambda r: (_topic(r.message_queue.topic.name, "sub"),),
    "Heartbeat": ANYONE, "Telemetry": ANYONE, "NotifyClientTermination": ANYONE,
    "SyncLiteSubscription": lambda r: _sub_topic_group(r.topic.name, r.group.name),
}


def _pull_records(raw: bytes) -> tuple:
    return (_topic(decode_pull(raw).topic, "sub"),)


DATA_RULES: dict[str, object] = {
    data.SEND_RECORDS: SEND_PATH, data.SEND_RECORDS_STREAM: SEND_PATH,
    data.PULL_RECORDS: _pull_records, data.PULL_RECORDS_STREAM: _pull_records,
}


def _arg(req, name: str) -> str:
    v = req.get(name) if isinstance(req, dict) else None
    return v if isinstance(v, str) else ""


ADMIN_RULES: dict[str, object] = {
    api.CREATE_TOPIC: lambda r: (_topic(_arg(r, "name"), "create"),) + ((_cluster("update"),)
                                                                         if isinstance(r, dict) and r.get("groups")
                                                                         else ()),
    api.DELETE_TOPIC: lambda r: (_topic(_arg(r, "topic"), "delete"),),
    api.LIST_TOPICS: lambda r: (_cluster("list"),),
    api.TOPIC_STATUS: lambda r: (_topic(_arg(r, "topic"), "get"),),
    api.QUERY: lambda r: (_topic(_arg(r, "topic"), "sub"),),
    api.GROUPS: lambda r: (_group(_arg(r, "group"), "get"),) if _arg(r, "group") else (_cluster("list"),),
    api.RESET_GROUP: lambda r: (_group(_arg(r, "group"), "update"), _topic(_arg(r, "topic"), "sub")),
    api.DISK_STATUS: lambda r: (_cluster("get"),), api.ALARMS: lambda r: (_cluster("get"),),
    api.STATUS: lambda r: (_cluster("get"),), api.CONFIG: lambda r: (_cluster("get"),),
    api.ARCHIVE: lambda r: (_cluster("get"),), api.REPLICATION: lambda r: (_cluster("get"),),
    api.CLUSTER: lambda r: (_cluster("get"),),
    api.SET_ALARM_LIMITS: lambda r: (_cluster("update"),), api.DELETE_EXPIRED: lambda r: (_cluster("update"),),
    api.PROMOTE: lambda r: (_cluster("update"),),
    # Follow makes this member call the address it names, signed with the broker's own keys (the
    # first super user's; the signature covers only its date): for super users only, as the keys are
    api.FOLLOW: SUPER,
    api.SET_CONFIG: lambda r: (_cluster("update"),), api.SET_QUOTA: lambda r: (_cluster("update"),),
    api.LIST_QUOTAS: lambda r: (_cluster("get"),),
    api.TOPIC_CONFIG: lambda r: (_topic(_arg(r, "topic"), "update" if isinstance(r, dict) and r.get("set") is not None
                                        else "get"),),
    api.CREATE_USER: SUPER, api.DELETE_USER: SUPER, api.LIST_USERS: SUPER,
    api.GRANT: SUPER, api.REVOKE: SUPER, api.LIST_ACL: SUPER,
    api.CREATE_GROUP: lambda r: (_group(_arg(r, "group"), "create"),),
    api.UPDATE_GROUP: lambda r: (_group(_arg(r, "group"), "update"),),
    api.DELETE_GROUP: lambda r: (_group(_arg(r, "group"), "delete"),),
}
assert set(ADMIN_RULES) == set(api.METHODS), "every admin method has its rule"

RULES: dict[str, object] = {
    **{MESSAGING + m: rule for m, rule in MESSAGING_RULES.items()},
    **{f"/{data.SERVICE}/{m}": rule for m, rule in DATA_RULES.items()},
    **{ADMIN_PREFIX + m: rule for m, rule in ADMIN_RULES.items()},
    **{f"/{rp.SERVICE}/{m}": SUPER for m in (rp.STREAM, rp.EPOCHS, rp.STATE)},
}


def messaging_rule_names() -> set[str]:
    """The MessagingService methods (the rules cover every one: tests/broker/protection/test_access.py)."""
    svc = spb.DESCRIPTOR.services_by_name["MessagingService"]
    return {m.name for m in svc.methods}


def _response_types() -> dict[str, type]:
    svc = spb.DESCRIPTOR.services_by_name["MessagingService"]
    return {m.name: getattr(spb, m.output_type.name) for m in svc.methods}


_RESPONSES = _response_types()
_ADMIN_CODES = {Code.UNAUTHORIZED: api.Refusal.UNAUTHORIZED, Code.FORBIDDEN: api.Refusal.FORBIDDEN}
_GRPC_CODES = {Code.UNAUTHORIZED: grpc.StatusCode.UNAUTHENTICATED, Code.FORBIDDEN: grpc.StatusCode.PERMISSION_DENIED}


def refusal_answer(method: str, code: int, text: str):
    """What ``method`` answers for a refusal with ``code`` (UNAUTHORIZED / FORBIDDEN), or None when
    its service has no field for it (answered with a gRPC status)."""
    if method.startswith(MESSAGING):
        cls = _RESPONSES.get(method[len(MESSAGING):])
        return cls(status=status(code, text)) if cls is not None else None
    if method.startswith(ADMIN_PREFIX):
        return api.refused(text, _ADMIN_CODES[code])
    if method in (data.SEND_RECORDS_PATH, data.SEND_RECORDS_STREAM_PATH):
        return encode_send(code, text)
    if method in (data.PULL_RECORDS_PATH, data.PULL_RECORDS_STREAM_PATH):
        return encode_pull({"code": code, "message": text, "status": "REFUSED", "count": 0})
    return None


class Refused(NamedTuple):
    """A call refused: answered with ``answer`` (its method's own way: refusal_answer), or, when
    its method has none (None), with the gRPC status ``grpc_code`` and ``text``."""
    grpc_code: grpc.StatusCode
    text: str
    answer: object


_MAKERS = {(False, False): grpc.unary_unary_rpc_method_handler, (False, True): grpc.unary_stream_rpc_method_handler,
           (True, False): grpc.stream_unary_rpc_method_handler, (True, True): grpc.stream_stream_rpc_method_handler}


def _behaviour(handler):
    """The function that serves ``handler``'s calls, whichever of the four gRPC kinds it is."""
    return handler.unary_unary or handler.unary_stream or handler.stream_unary or handler.stream_stream


def _gated(handler, gate: Callable[[object, object], Refused | None], enter: Callable[[object], None] | None = None,
           serves: bool = True, raw: bool = False):
    """A handler of ``handler``'s kind (one of the four) whose calls first ask ``gate(request,
    context)`` (request None when the requests are streamed: asked before the first is read): None
    serves the call with ``handler``'s own behaviour, a Refused answers it instead. ``enter(context)``
    runs before the gate on the event loop only (the admin's synchronous handlers run on threads, where
    a context variable set would outlive the call); ``serves`` False: every call is refused (the gate
    never says None); ``raw``: the request is not decoded (refused before its bytes are looked at)."""
    streamed_in, streamed_out = handler.request_streaming, handler.response_streaming
    inner = _behaviour(handler) if serves else None

    def ask(request, context) -> Refused | None:
        if enter is not None:
            enter(context)
        return gate(None if streamed_in else request, context)

    if not streamed_out and inner is not None and not inspect.iscoroutinefunction(inner):
        def call(request, context):                 # the admin's handlers (on threads)
            no = gate(None if streamed_in else request, context)
            if no is None:
                return inner(request, context)
            if no.answer is None:
                context.abort(no.grpc_code, no.text)
            return no.answer
    elif not streamed_out or (inner is not None and not inspect.isasyncgenfunction(inner)):
        async def call(request, context):           # one answer, or a behaviour writing its own (context.write)
            no = ask(request, context)
            if no is None:
                return await inner(request, context)
            if no.answer is None:
                await context.abort(no.grpc_code, no.text)
            if not streamed_out:
                return no.answer
            await context.write(no.answer)
    else:
        async def call(request, context):
            no = ask(request, context)
            if no is None:
                async for item in inner(request, context):
                    yield item
                return
            if no.answer is None:
                await context.abort(no.grpc_code, no.text)
            yield no.answer
    return _MAKERS[streamed_in, streamed_out](call, None if raw else handler.request_deserializer,
                                              handler.response_serializer)


def _refusing(method: str, handler, code: int, text: str, on_call: Callable[[object], None], raw: bool):
    """A handler like ``handler`` that answers every call with the refusal (``raw``: the request is
    not decoded: refused before its bytes are looked at); ``on_call(context)`` runs first (the log)."""
    refused = Refused(_GRPC_CODES[code], text, refusal_answer(method, code, text))

    def gate(_request, context) -> Refused:
        on_call(context)
        return refused
    return _gated(handler, gate, serves=False, raw=raw)


def first_handler(handlers, details):
    """The method handler the first of ``handlers`` (generic handlers, in order) has for ``details``,
    as grpc's own look-up finds it; None when none has one."""
    for h in handlers:
        found = h.service(details)
        if found is not None:
            return found
    return None


class Guard(grpc.GenericRpcHandler):
    """The generic handlers of a port, each call authenticated and authorized first (see above)."""

    def __init__(self, inner: list, auth: Authenticator, acl: Acl, refusals: Refusals,
                 forwarded: ForwardedFor | None = None) -> None:
        """``forwarded``: how a call a member forwarded says whose it is (forwarded.py): every address
        check judges such a call by its client's address."""
        self.inner = inner
        self.auth = auth
        self.acl = acl
        self.refusals = refusals
        self.forwarded = forwarded
        # (method, user) -> (the handler, its guarded twin): made once, not per call
        self._made: dict[tuple[str, str], tuple] = {}

    def service(self, details):
        handler = first_handler(self.inner, details)
        if handler is None:
            return None
        method = details.method
        metadata = details.invocation_metadata
        who = self.auth.verify(metadata)
        # a call a member forwarded (a follower's leader port): judged by its client's address
        client = self.forwarded.peer(metadata) if self.forwarded is not None else None
        if type(who) is not Signed:
            refusals = self.refusals

            def log_it(context, who=who):
                refusals.refused(who.failure, client or context.peer(), who.access_key, method, who.text)
            return _refusing(method, handler, Code.UNAUTHORIZED, who.text, log_it, raw=True)
        if client is not None:
            return self._twin(method, handler, who.access_key, client)     # not kept: one per call
        key = (method, who.access_key)
        made = self._made.get(key)
        if made is None or made[0] is not handler:
            if len(self._made) > 100_000:
                self._made.clear()
            made = self._made[key] = (handler, self._twin(method, handler, who.access_key))
        return made[1]

    # authorization ------------------------------------------------------------------------------
    def check(self, method: str, request, user: str, peer: str) -> str | None:
        """None when ``user`` may make this call from ``peer``, else the FORBIDDEN text."""
        rule = RULES.get(method)
        if rule is ANYONE or rule is SEND_PATH:
            return None
        if rule is SUPER:
            return None if self.acl.is_super(user) else (f"forbidden: {method} is for super users; user {user!r} "
                                                         f"is not one")
        if rule is None:            # a method without a rule: only super users (fail closed)
            return None if self.acl.is_super(user) else f"forbidden: user {user!r} may not call {method}"
        if undecodable(request) or api.is_bad(request):
            return None             # its handler refuses it (INVALID_ARGUMENT / BAD_REQUEST), reading nothing
        try:
            needs = rule(request)
        except Exception as e:  # noqa: BLE001 - a request whose resources cannot be read
            if method.startswith(f"/{data.SERVICE}/"):
                return None         # a frame that is not one: its handler answers BAD_REQUEST, reading nothing
            return f"forbidden: cannot tell what {method} would touch ({type(e).__name__})"
        ip = peer_ip(peer)
        for need in needs:
            if need.kind == "topic" and need.name in SYSTEM_TOPICS and not self.acl.is_super(user):
                return (f"forbidden: topic {need.name!r} is the broker's own; user {user!r} is not a super "
                        f"user (a pattern such as '*' does not cover it)")
            ok, why = self.acl.allowed_any(user, need.kind, need.name, need.actions, ip)
            if not ok:
                return why
        return None

    def forbid(self, method: str, user: str, peer: str, text: str) -> None:
        self.refusals.refused(Failure.FORBIDDEN, peer, user, method, text)

    def _twin(self, method: str, handler, user: str, client: str | None = None):
        """``handler`` whose calls first set IDENTITY and pass ``check`` (a call refused is answered
        FORBIDDEN the way its method answers: refusal_answer, else gRPC PERMISSION_DENIED). Streamed
        requests (Telemetry, SendRecordsStream, the replication stream) are decided by the user alone
        (their rules are ANYONE, SEND_PATH or SUPER), before the first request is read. ``client``: the
        address of the client whose call a member forwarded (else the call's own peer)."""
        if _behaviour(handler) is None:
            return handler
        guard = self

        def identify(context) -> None:
            IDENTITY.set(Identity(user, client or context.peer()))

        def refuse(request, context) -> Refused | None:
            peer = client or context.peer()
            why = guard.check(method, request, user, peer)
            if why is None:
                return None
            guard.forbid(method, user, peer, why)
            return Refused(grpc.StatusCode.PERMISSION_DENIED, why, refusal_answer(method, Code.FORBIDDEN, why))
        return _gated(handler, refuse, identify)


def vet_settings(acl: Acl, user: str, peer: str, settings) -> tuple:
    """What a Telemetry settings command (open to any user) may make the broker do for ``user``:
    (None, the settings as the broker takes them) or (the FORBIDDEN text, None).

    * a producer's declared topics are the ones the broker sends its transaction checks (half
      messages, bodies included) to when their sender is gone: only those the user may pub stay;
    * a lite consumer's settings make its group consume the bind topic as lite topics (consume/lite.py:
      messages of lite topics no client of the group subscribes are passed over for the group): they
      need sub on the group and on the topic, else FORBIDDEN and nothing changes.
    Other settings change nothing on the broker (a receive is checked when it comes)."""
    from ...protocol.stubs import pb
    ip = peer_ip(peer)
    if settings.client_type in (pb.ClientType.LITE_SIMPLE_CONSUMER, pb.ClientType.LITE_PUSH_CONSUMER):
        sub = settings.subscription
        needs = [_group(sub.group.name, "sub")] + [_topic(e.topic.name, "sub") for e in sub.subscriptions[:1]]
        for need in needs:
            ok, why = acl.allowed_any(user, need.kind, need.name, need.actions, ip)
            if not ok:
                return why, None
    if settings.HasField("publishing"):
        topics = settings.publishing.topics
        keep = [t for t in topics if acl.allowed(user, "topic", t.name, "pub", ip)[0]]
        if len(keep) < len(topics):
            taken = type(settings)()
            taken.CopyFrom(settings)
            del taken.publishing.topics[:]
            taken.publishing.topics.extend(keep)
            settings = taken
    return None, settings


def peer_of(context) -> str:
    """The address of the current call's client: the guard's (a forwarded call's client, forwarded.py),
    else the call's own peer (authentication off)."""
    who = IDENTITY.get()
    return who.peer if who is not None else context.peer()


def may_pub_now(acl: Acl, who: Identity, topic: str) -> bool:
    """Whether ``who`` (a Telemetry stream's user, from where it opened it) may pub ``topic`` now: the
    orphan checks of a topic (half messages, bodies included) go only to a producer that may."""
    return acl.allowed(who.user, "topic", topic, "pub", peer_ip(who.peer))[0]


def sub_allowed_now(acl: Acl | None, topic: str, group: str = "") -> str | None:
    """For a long poll whose wait ended (ReceiveMessage, PullMessage, PullRecords): the FORBIDDEN text
    when its user may no longer sub on ``topic`` (and on ``group``, when one is named), else None (None
    too with authentication off): a revoke while it waited hands nothing out."""
    if acl is None:
        return None
    why = allowed_now(acl, "topic", topic, "sub")
    if why is None and group:
        why = allowed_now(acl, "group", group, "sub")
    return why


def allowed_now(acl: Acl, kind: str, name: str, action: str) -> str | None:
    """For a long call already past the guard (a PullRecordsStream that long-polls on and on): the
    FORBIDDEN text when its user (IDENTITY) may no longer ``action`` on ``kind``:``name`` (a revoke or
    the user deleted since the call began), else None (None too without an identity: authentication
    off)."""
    who = IDENTITY.get()
    if who is None:
        return None
    ok, why = acl.allowed(who.user, kind, name, action, peer_ip(who.peer))
    return None if ok else why
