"""The admin service of a running broker: ``/tidemq.Admin/<Method>``, JSON in and out.

No .proto of our own (a second descriptor set would only add risk, see
docs/broker-protocol.md P1): generic unary methods with UTF-8 JSON bodies. Served by
broker/admin.py; called by the CLI (``tidemq topic --endpoint``, ``tidemq alarms``), the
benchmarks and tests through tidemq.client.admin.call (this module is bytes in, values out: no
channel). Loopback only by default, like the broker
itself; signed like every call when authentication is on (``metadata``:
signing.signed_metadata). Every answer has ``ok``; ``ok: false`` comes with ``error``
(text for people) and ``code`` (a ``Refusal``, for programs: BAD_REQUEST, LIMIT_EXCEEDED,
NOT_FOUND, FORBIDDEN, NOT_LEADER).

    method          request                                     answer (ok: true)
    CreateTopic     {"name": str, "queues": int (a new topic: 8),  {"topic", "queues": int, "space_policy"}
                     "space_policy": "evict" | "refuse",          (queues above the broker's topic_queues_max:
                     "groups": [str] (optional)}                  LIMIT_EXCEEDED; space_policy absent: a new
                                                                  topic's is evict, an existing one's stays)
                                                                  (+ "owners": {group: [queue ids]} with
                                                                  groups: the queues spread over those broker
                                                                  groups, kept in the coordinator); + "note"
                                                                  when fewer queues were asked than the topic
                                                                  has (queues are never taken away)
    ListTopics      {}                                          {"topics": [{"topic", "space_policy", "system":
                                                                  bool, "messages", "bytes", "bytes_exact",
                                                                  "settings", "queues": [{"id", "min_offset",
                                                                  "max_offset"}]}]}
    DiskStatus      {}                                          {"status": the store's disk status}
    DeleteExpired   {}                                          {} (the cleaner is triggered)
    Alarms          {}                                          {"alarms": ALARMS}
    SetAlarmLimits  any of ALARM_LIMITS: {"memory_high_watermark_bytes": int >= 0,
                    "memory_high_watermark_ratio": 0 < float < 1, "disk_free_limit_bytes": int >= 0}
                                                                {"alarms": ALARMS}

ALARMS: {"memory": ALARM, "disk": ALARM, "refusal": str | null, "checks": int,
"flow": {"flush_backlog_bytes", "flush_backlog_high_bytes", "connections_sending",
"inflight_requests", "inflight_bytes", "held_total", "refused_total"}, "auth": bool,
"tls": bool}; ALARM: {"resource", "raised", "reading_bytes", "limit_bytes", "where",
"message", "raised_count"}. SetAlarmLimits changes the limits until the broker restarts
(RabbitMQ's set_vm_memory_high_watermark / set_disk_free_limit).

    Status          {}                                          {"status": the broker at a glance
                                                                  (broker/observe/status.py)}
    Groups          {"group": str | null}                       {"lag": [{"group", "topic", "queue",
                                                                  "kind", "committed_offset", "max_offset",
                                                                  "min_offset", "lag", "inflight"}],
                                                                 "groups": [{"group", "topics", "lag",
                                                                  "inflight"}]}
    Query           {"topic": str, one of "key": str, "id": str,  {"messages": [MESSAGE]}, at most "max"
                    "commitlog_offset": int, "queue": int with    (<= the broker's query_messages_max, 64);
                                                                  newest first by key / id
                    "timestamp_ms": int; "max": int = 16}
    TopicStatus     {"topic": str}                              {"topic", "space_policy", "queues": [{"id", "min_offset",
                                                                  "max_offset", "messages"}], "messages",
                                                                  "groups": [{"group", "lag", "inflight"}]}
    Config          {}                                          {"store": {name: value}, "broker": {name:
                                                                  value}} (secrets as "***")
    DeleteTopic     {"topic": str, "forget_topology": bool}     {"topic", "queues", "messages", "log_end"}:
                                                                  queues deleted, records dead in the log
                                                                  until cleanup, groups' offsets dropped;
                                                                  forget_topology: only the coordinator's
                                                                  entry of a spread topic goes (sent after
                                                                  every owning group deleted its part)
    ResetGroup      {"group": str, "topic": str, "to":          {"reset": [{"topic", "queue", "kind",
                    "earliest" | "latest" | int (>= 10**12: a     "from", "to"}], "dry_run": bool}: pull
                    time in ms, else an offset), or               offsets and pop cursors (in-flight messages
                    "timestamp_ms": int, or "offsets":            forgotten); a group that never consumed here
                    {queue id: offset}; "dry_run": bool,          is NOT_FOUND (a reset creates no group); one
                    "force": bool}                                with live consumers is refused BUSY unless
                                                                  force (Kafka refuses a reset of an active
                                                                  group); dry_run: what would change, nothing
                                                                  changed

    SetConfig       {"name": str, "value": any}                 {"name", "section", "before", "value"}: a
                                                                  setting of broker_live_settings changed until
                                                                  the broker restarts, checked as a start checks
                                                                  it (UNKNOWN_SETTING with "did you mean",
                                                                  RESTART_NEEDED, BAD_REQUEST for a value)
    TopicConfig     {"topic": str, "set": {name: value | null}   {"topic", "settings": {retention_hours,
                    (optional: without it, the settings shown)}   retention_bytes, max_message_bytes: value or
                                                                  null (the store's)}, "space_policy", "store":
                                                                  {the store's defaults}}; null or "default"
                                                                  unsets one (kept in the broker state, copied
                                                                  to followers)

    SetQuota        {one of "user", "client_id", "topic": str,  {"entity": "user:U" | "client:C" | "topic:T",
                    "produce_bytes_per_s": int, "fetch_bytes_     "quota": {"produce", "fetch"}}: bytes per
                    per_s": int} (0: none; absent: unchanged)     second, live, in the broker state
    ListQuotas      {}                                          {"quotas": {entity: {"produce", "fetch"}},
                                                                  "stats": [{"entity", "direction",
                                                                  "bytes", "throttled", "throttled_seconds",
                                                                  "refused"}]}

    Archive         {}                                          {"manifest", "dest": str | null, "runs":
                                                                  [str], "gaps_file", "gaps": int}: where
                                                                  the store's archive is (paths on the
                                                                  broker's host; store/archive.py)
    Replication     {}                                          {"replication": the broker's place in its
                                                                  group (role, epoch, leader, followers with
                                                                  their lag in bytes and seconds, its copy)}
                                                                  or {"replication": null} outside a group
    Promote         {}                                          {"epoch": int}: this follower leads (a group
                                                                  without a coordinator: manual failover)
    Follow          {"leader": "HOST:PORT"}                     {"leader"}: this broker follows that leader
                                                                  (it first cuts what its log has that the
                                                                  leader's has not)
    Cluster         {}                                          {"cluster": groups, members, roles, epochs,
                                                                  topics' queue owners (the coordinator's)}

Consumer-group settings (broker/consume/groups.py; SETTINGS: {"retry_max": int, "retry_policy":
{"kind": "exponential", "initial_ms", "max_ms", "multiplier"} | {"kind": "customized", "delays_ms": [int]},
"orderly": bool, "consume_enable": bool}):

    CreateGroup     {"group": str, "retry_max": int, "retry_policy": {"group", "settings": SETTINGS}: fields not
                    text ("exponential:100,60000,2" |              given take the broker's defaults; EXISTS when
                    "customized:1s,5s") or object, "orderly":      the group has settings already
                    bool, "consume_enable": bool} (all optional
                    but group)
    UpdateGroup     the same                                    {"group", "settings"}: only the fields given
                                                                  change; NOT_FOUND when it has none
    DeleteGroup     {"group": str}                              {"group"}: back to the broker's defaults
                                                                  (NOT_FOUND when it has no settings)

Groups answers, besides, "settings": SETTINGS of the group asked for (its own or the defaults) and
"created": whether it has settings of its own.

Users and their permissions (broker/protection/acl.py; super users only):

    CreateUser      {"name": str, "secret_key": str, "super":    {"user": {"name", "super"}}
                    bool = false}
    DeleteUser      {"name": str}                               {"user": name}
    ListUsers       {}                                          {"users": [{"name", "super", "builtin"}]}
    Grant           {"user": str, "resource": "topic:PATTERN" |  {"user", "policies": [POLICY]}: the
                    "group:PATTERN" | "cluster", "actions":       actions added to the user's policy on the
                    [ACTION], "decision": "allow" | "deny" =      resource with that decision and source_ips
                    "allow", "source_ips": [CIDR] = []}           (one made when there is none)
    Revoke          {"user", "resource", "actions", "decision":  {"user", "policies": [POLICY]}: the actions
                    "allow" | "deny" | null = null}               taken off the user's policies on exactly
                                                                  that resource (a policy left with none goes)
    ListAcl         {"user": str | null}                        {"policies": {user: [POLICY]}}

POLICY: {"resource", "actions", "decision", "source_ips"}; ACTION: pub, sub, create, update, delete,
get, list, all. Secret keys are never answered. With authentication off (no access_key on the
broker) these methods are refused (nothing would be checked).

Refusals of who calls (the broker's authentication and authorization, broker/protection/access.py):
UNAUTHORIZED (no, or a wrong, signature) and FORBIDDEN (the user may not: the error names the user,
the action and the resource). Every method is checked: which action each needs is access.ADMIN_RULES.

In a broker group, a follower refuses CreateTopic, DeleteTopic, ResetGroup, the group settings and the user and ACL
changes (topics, offsets, users and policies are the leader's, copied to it) with the code
NOT_LEADER and an error naming the leader.

MESSAGE: {"topic", "queue", "queue_offset", "commitlog_offset", "msg_id", "tags", "keys",
"properties", "born_timestamp_ms", "store_timestamp_ms", "body_bytes", "body" (UTF-8, undecodable
bytes escaped)}.
"""

from __future__ import annotations

import enum
import json


SERVICE = "tidemq.Admin"

CREATE_TOPIC = "CreateTopic"
LIST_TOPICS = "ListTopics"
DISK_STATUS = "DiskStatus"
DELETE_EXPIRED = "DeleteExpired"
ALARMS = "Alarms"
SET_ALARM_LIMITS = "SetAlarmLimits"
STATUS = "Status"
GROUPS = "Groups"
QUERY = "Query"
TOPIC_STATUS = "TopicStatus"
CONFIG = "Config"
RESET_GROUP = "ResetGroup"
DELETE_TOPIC = "DeleteTopic"
ARCHIVE = "Archive"
REPLICATION = "Replication"
PROMOTE = "Promote"
FOLLOW = "Follow"
CLUSTER = "Cluster"
CREATE_USER = "CreateUser"
DELETE_USER = "DeleteUser"
LIST_USERS = "ListUsers"
GRANT = "Grant"
REVOKE = "Revoke"
LIST_ACL = "ListAcl"
CREATE_GROUP = "CreateGroup"
UPDATE_GROUP = "UpdateGroup"
DELETE_GROUP = "DeleteGroup"
SET_CONFIG = "SetConfig"
TOPIC_CONFIG = "TopicConfig"
SET_QUOTA = "SetQuota"
LIST_QUOTAS = "ListQuotas"
METHODS = (CREATE_TOPIC, LIST_TOPICS, DISK_STATUS, DELETE_EXPIRED, ALARMS, SET_ALARM_LIMITS, STATUS, GROUPS, QUERY,
           TOPIC_STATUS, CONFIG, RESET_GROUP, DELETE_TOPIC, ARCHIVE, REPLICATION, PROMOTE, FOLLOW, CLUSTER,
           CREATE_USER, DELETE_USER, LIST_USERS, GRANT, REVOKE, LIST_ACL, CREATE_GROUP, UPDATE_GROUP, DELETE_GROUP,
           SET_CONFIG, TOPIC_CONFIG, SET_QUOTA, LIST_QUOTAS)
# the methods that change something (each logged in an audit line: who, what, from where)
CHANGES = frozenset((CREATE_TOPIC, DELETE_EXPIRED, SET_ALARM_LIMITS, RESET_GROUP, DELETE_TOPIC, PROMOTE, FOLLOW,
                     CREATE_USER, DELETE_USER, GRANT, REVOKE, CREATE_GROUP, UPDATE_GROUP, DELETE_GROUP, SET_CONFIG,
                     TOPIC_CONFIG, SET_QUOTA))
SECRET_FIELDS = frozenset(("secret_key",))      # never written to a log
TIMESTAMP_MS_MIN = 10**12          # --to: a number from here on is a time in ms, below it an offset
QUERY_MAX = 64                     # the default of BrokerConfig.query_messages_max
QUERY_BY = ("key", "id", "commitlog_offset", "queue")

QUEUES_DEFAULT = 8
SPACE_POLICIES = ("evict", "refuse")


class Refusal(str, enum.Enum):
    """Why an admin request was refused (the answer's ``code``)."""
    BAD_REQUEST = "BAD_REQUEST"          # not a request of the method, or a value out of its range
    LIMIT_EXCEEDED = "LIMIT_EXCEEDED"    # a count above the broker's limit for it (a ``_max`` setting)
    NOT_FOUND = "NOT_FOUND"              # no such topic
    FORBIDDEN = "FORBIDDEN"              # not allowed on this thing (a system topic, a broker in no group), or
                                         # not by this user (what you may do: the error names user, action, resource)
    NOT_LEADER = "NOT_LEADER"            # a follower: topics and offsets are the leader's (the error names it)
    UNAUTHORIZED = "UNAUTHORIZED"        # no signature, or not one of a known user's (who you are)
    EXISTS = "EXISTS"                    # a user (a group's settings) of that name exists already
    UNKNOWN_SETTING = "UNKNOWN_SETTING"  # SetConfig: no setting of that name (the error says which is close)
    RESTART_NEEDED = "RESTART_NEEDED"    # SetConfig: a setting that changes only with a restart
    BUSY = "BUSY"                        # ResetGroup: the group has live consumers (force to reset anyway)
    STATE_WRITE_FAILED = "STATE_WRITE_FAILED"  # the change could not be written to the broker's disk (full,
                                         # failing, gone): nothing changed; the same request may be sent again
    STATE_NOT_DURABLE = "STATE_NOT_DURABLE"  # written, but the broker's disk could not make it durable (a
                                         # directory fsync failed): taken back, not in effect now, yet a crash
                                         # may still bring it back; send the same request again (not OK)
ALARM_LIMITS = ("memory_high_watermark_bytes", "memory_high_watermark_ratio", "disk_free_limit_bytes")


def dumps(obj) -> bytes:
    return json.dumps(obj, default=str).encode()


class _Bad(dict):
    """What ``loads`` gives for bytes that are not a JSON request (answered with a refusal)."""


def loads(data: bytes):
    """A request's JSON; a ``_Bad`` (empty dict) when it is not JSON, nested too deep, or not UTF-8."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError, TypeError):
        return _Bad()


def is_bad(req) -> bool:
    return isinstance(req, _Bad)


def create_topic_request(req: dict) -> tuple[str, int | None, str | None]:
    """(name, queues or None, space policy or None) of a CreateTopic request; ValueError when it is
    not one. No queues: QUEUES_DEFAULT for a new topic, an existing one keeps its count. (Its
    ``message_type``: message_type_of.)"""
    if not isinstance(req, dict):
        raise ValueError("a request is a JSON object")
    if isinstance(req.get("queues"), str):
        req = {**req, "queues": _digits(req["queues"], 11)}      # a count given as text (None: refused below)
    policy = req.get("space_policy")
    if policy is not None and policy not in SPACE_POLICIES:
        raise ValueError(f"space_policy is one of {', '.join(SPACE_POLICIES)}")
    return _name(req, "name"), _int(req, "queues", 1, 1 << 31) if "queues" in req else None, policy


MESSAGE_TYPES = ("normal", "fifo", "delay", "transaction", "mixed")


def message_type_of(req: dict) -> str | None:
    """The ``message_type`` a CreateTopic request sets (None: a new topic's is mixed, an existing
    one's stays); ValueError naming the choices."""
    t = req.get("message_type")
    if t is not None and (not isinstance(t, str) or t.lower() not in MESSAGE_TYPES):
        raise ValueError(f"message_type is one of {', '.join(MESSAGE_TYPES)}")
    return t.lower() if t is not None else None


def alarm_limits(req: dict) -> dict:
    """The limits a SetAlarmLimits request sets (ratio as float, bytes as int); ValueError or
    TypeError saying what is wrong when it is not one."""
    if not isinstance(req, dict):
        raise ValueError(f"give some of {', '.join(ALARM_LIMITS)} in a JSON object")
    args: dict = {}
    for k, v in req.items():
        if k not in ALARM_LIMITS:
            raise ValueError(f"give some of {', '.join(ALARM_LIMITS)} (got {sorted(map(str, req))})")
        if isinstance(v, str) and len(v) < 40:       # "0.5", "10": numbers given as text
            try:
                v = float(v) if any(c in v for c in ".eEnN") else int(v)
            except ValueError:
                raise ValueError(f"{k} is a number (got {v!r})") from None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")):
            raise ValueError(f"{k} is a finite number")
        if k.endswith("ratio"):
            args[k] = float(v)
        elif isinstance(v, float) and not v.is_integer():
            raise ValueError(f"{k} is a whole number of bytes")
        else:
            args[k] = int(v)
    if not args:
        raise ValueError(f"give some of {', '.join(ALARM_LIMITS)}")
    if any(v < 0 or v > 1 << 62 for v in args.values()) or not 0 < args.get("memory_high_watermark_ratio", 0.5) < 1:
        raise ValueError("limits are in [0, 2^62] bytes and the ratio is in (0, 1)")
    return args


def group_request(req: dict) -> str | None:
    """The group a Groups request names (None: every group); ValueError when it is not one."""
    g = req.get("group") if isinstance(req, dict) else None
    if g is not None and (not isinstance(g, str) or not g or len(g) > 255):
        raise ValueError("group is a non-empty string of at most 255 characters")
    return g


def _digits(text: str, most: int) -> int | None:
    """``text`` as an int when it is 1 to ``most`` ASCII digits (a number a request gives as text),
    else None. (str.isdigit takes a superscript two, which int() refuses; str.isdecimal other
    scripts' digits, which int() reads but no address, and no client, means.)"""
    if 0 < len(text) <= most and text.isascii() and text.isdecimal():
        return int(text)
    return None


def _int(req: dict, name: str, lo: int = 0, hi: int = (1 << 63) - 1) -> int:
    v = req.get(name)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError(f"{name} is an integer in [{lo}, {hi}]")
    return v


def _name(req: dict, name: str) -> str:
    v = req.get(name)
    if not isinstance(v, str) or not v or len(v) > 255:
        raise ValueError(f"{name} is a non-empty string of at most 255 characters")
    return v


def query_request(req: dict, max_limit: int = QUERY_MAX) -> tuple[str, str, object, int]:
    """(topic, by, what, max) of a Query request: by is one of QUERY_BY, what the key / id /
    offset / (queue, timestamp_ms); ValueError saying what is wrong when it is not one
    (``max`` above ``max_limit``: LimitError)."""
    if not isinstance(req, dict):
        raise ValueError("a Query request is a JSON object")
    topic = _name(req, "topic")
    given = [b for b in QUERY_BY if b in req]
    if len(given) != 1:
        raise ValueError(f"give exactly one of {', '.join(QUERY_BY)} (got {given or 'none'})")
    by = given[0]
    what: object
    if by in ("key", "id"):
        what = _name(req, by)
    elif by == "commitlog_offset":
        what = _int(req, by)
    else:
        what = (_int(req, "queue", 0, 1 << 20), _int(req, "timestamp_ms"))
    n = _int(req, "max", 1, 1 << 62) if "max" in req else min(16, max_limit)
    if n > max_limit:
        raise LimitError(f"max is at most {max_limit} (the broker's query_messages_max)")
    return topic, by, what, n


QUEUE_OFFSETS_MAX = 65_536          # queues one ResetGroup "offsets" may name


def reset_request(req: dict) -> tuple[str, str, str | int | dict, bool, bool]:
    """(group, topic, to, dry_run, force) of a ResetGroup request; ``to`` is "earliest", "latest",
    an offset, a time in ms (an int >= TIMESTAMP_MS_MIN, or {"timestamp_ms": int} from "timestamp_ms"),
    or {queue id: offset} (from "offsets"); ValueError saying what is wrong when it is not one."""
    if not isinstance(req, dict):
        raise ValueError("a request is a JSON object")
    given = [k for k in ("to", "timestamp_ms", "offsets") if k in req]
    if len(given) != 1:
        raise ValueError(f"give exactly one of to, timestamp_ms, offsets (got {given or 'none'})")
    if "offsets" in req:
        offs = req["offsets"]
        if not isinstance(offs, dict) or not offs or len(offs) > QUEUE_OFFSETS_MAX:
            raise ValueError("offsets is {queue id: offset}, at least one")
        to: str | int | dict = {}
        for q, o in offs.items():
            qid = _digits(q, 6) if isinstance(q, str) else None
            if qid is None or isinstance(o, bool) or not isinstance(o, int) or not 0 <= o < 1 << 62:
                raise ValueError(f"offsets: {q!r}={o!r}: a queue id and an offset >= 0")
            to[qid] = o
    elif "timestamp_ms" in req:
        to = {"timestamp_ms": _int(req, "timestamp_ms", 0, 1 << 62)}
    else:
        to = req.get("to")
        if to not in ("earliest", "latest"):
            to = _int(req, "to")
    flags = []
    for k in ("dry_run", "force"):
        v = req.get(k, False)
        if not isinstance(v, bool):
            raise ValueError(f"{k} is true or false")
        flags.append(v)
    return _name(req, "group"), _name(req, "topic"), to, flags[0], flags[1]


def set_config_request(req: dict) -> tuple[str, object]:
    """(name, value) of a SetConfig request; ValueError when it is not one."""
    if not isinstance(req, dict) or "value" not in req:
        raise ValueError("give name and value")
    v = req["value"]
    if not isinstance(v, (str, int, float, bool)) or (isinstance(v, str) and len(v) > 4096):
        raise ValueError("value is a string, a number or true / false")
    return _name(req, "name"), v


def quota_request(req: dict) -> tuple[str, str, int | None, int | None]:
    """(kind: user | client | topic, name, produce or None, fetch or None) of a SetQuota request."""
    if not isinstance(req, dict):
        raise ValueError("a request is a JSON object")
    given = [k for k in ("user", "client_id", "topic") if k in req]
    if len(given) != 1:
        raise ValueError(f"give exactly one of user, client_id, topic (got {given or 'none'})")
    rates = []
    for k in ("produce_bytes_per_s", "fetch_bytes_per_s"):
        rates.append(_int(req, k, 0, 1 << 50) if k in req else None)
    if rates == [None, None]:
        raise ValueError("give produce_bytes_per_s and / or fetch_bytes_per_s (0: none)")
    kind = {"user": "user", "client_id": "client", "topic": "topic"}[given[0]]
    return kind, _name(req, given[0]), rates[0], rates[1]


def topic_config_request(req: dict) -> tuple[str, dict | None]:
    """(topic, changes or None: show) of a TopicConfig request; ValueError when it is not one."""
    if not isinstance(req, dict):
        raise ValueError("a request is a JSON object")
    changes = req.get("set")
    if changes is not None:
        if not isinstance(changes, dict) or not changes or len(changes) > 16 or not all(
                isinstance(k, str) and (v is None or isinstance(v, (str, int, float)) and not isinstance(v, bool))
                for k, v in changes.items()):
            raise ValueError("set is {setting: value or null}, at least one")
    return _name(req, "topic"), changes


def topic_request(req: dict) -> str:
    if not isinstance(req, dict):
        raise ValueError("a request is a JSON object")
    return _name(req, "topic")


def groups_of(req: dict) -> list[str]:
    """The broker groups a CreateTopic request spreads its queues over ([]: this broker's alone)."""
    gs = req.get("groups") if isinstance(req, dict) else None
    if gs is None:
        return []
    if not isinstance(gs, list) or not gs or len(gs) > 256 or not all(isinstance(g, str) and g and len(g) <= 255
                                                                       for g in gs) or len(set(gs)) != len(gs):
        raise ValueError("groups is a list of distinct broker group names")
    return gs


def follow_request(req: dict) -> str:
    """The leader (HOST:PORT) a Follow request names; ValueError when it is not one."""
    leader = _name(req, "leader") if isinstance(req, dict) else None
    host, _, port = (leader or "").rpartition(":")
    if not host or not 0 < (_digits(port, 5) or 0) < 65536:
        raise ValueError("leader is HOST:PORT")
    return leader


def user_request(req: dict) -> tuple[str, str, bool]:
    """(name, secret key, super) of a CreateUser request; ValueError when it is not one."""
    if not isinstance(req, dict):
        raise ValueError("a request is a JSON object")
    sup = req.get("super", False)
    if not isinstance(sup, bool):
        raise ValueError("super is true or false")
    secret = req.get("secret_key")
    if not isinstance(secret, str):
        raise ValueError("secret_key is a string")
    return _name(req, "name"), secret, sup


def name_request(req: dict) -> str:
    """The user a DeleteUser request names; ValueError when it is not one."""
    if not isinstance(req, dict):
        raise ValueError("a request is a JSON object")
    return _name(req, "name")


def acl_request(req: dict) -> tuple[str, str, list, str | None, list | None]:
    """(user, resource, actions, decision or None, source_ips or None) of a Grant / Revoke request;
    ValueError when it is not one (the values themselves are checked by the broker's ACL)."""
    if not isinstance(req, dict):
        raise ValueError("a request is a JSON object")
    resource, actions = req.get("resource"), req.get("actions")
    if not isinstance(resource, str) or not isinstance(actions, list) or not actions:
        raise ValueError("give resource (topic:PATTERN, group:PATTERN or cluster) and actions (a list)")
    decision, ips = req.get("decision"), req.get("source_ips")
    if decision is not None and decision not in ("allow", "deny"):
        raise ValueError("decision is allow or deny")
    if ips is not None and not isinstance(ips, list):
        raise ValueError("source_ips is a list of CIDRs")
    return _name(req, "user"), resource, actions, decision, ips


def masked(req) -> dict:
    """A request as an audit line shows it: secret fields as "***"."""
    if not isinstance(req, dict):
        return {}
    return {k: ("***" if k in SECRET_FIELDS else v) for k, v in req.items()}


class LimitError(ValueError):
    """A request asks for more than a limit allows: refused with LIMIT_EXCEEDED."""


def refused(error: str, code: Refusal = Refusal.BAD_REQUEST) -> dict:
    return {"ok": False, "error": error, "code": code.value}
