"""The admin service of the running broker, ``/tidemq.Admin/<Method>``: what each method does
over the store and the broker. The methods, their JSON shapes and the caller are
protocol/admin.py. Who may call which (with authentication on) is decided before a method runs
(protection/access.py); every change made is logged at INFO on ``tidemq.audit``: who (the access
key that signed it, "anonymous" with authentication off), from where (the peer), what (the
method and its request, secret keys masked).
"""

from __future__ import annotations

import asyncio
import json
import logging

import grpc

from ..io import NotDurable
from ..protocol import admin as api
from ..protocol.signing import AUTH_HEADER, SignatureError, parse_authorization
from ..store import MessageStore
from ..store.archive import archive_summary
from .consume import group_admin
from .observe.console import group_console
from .topic_names import SYSTEM_TOPICS

log = logging.getLogger("tidemq.broker")
audit = logging.getLogger("tidemq.audit")


class Admin:
    def __init__(self, store: MessageStore, broker=None) -> None:
        self.store = store
        self.broker = broker           # server.Broker: alarms and flow control (None: store-only admin)

    def _follower(self) -> dict | None:
        """A refusal naming the leader while this broker follows (topics and offsets are the leader's)."""
        b = self.broker
        why = b.write_refusal() if b is not None and hasattr(b, "write_refusal") else None
        return api.refused(why, api.Refusal.NOT_LEADER) if why else None

    def create_topic(self, req: dict) -> dict:
        if (no := self._follower()) is not None:
            return no
        try:
            name, queues, policy = api.create_topic_request(req)
            kind = api.message_type_of(req)
            groups = api.groups_of(req)
        except (KeyError, ValueError, TypeError) as e:
            return api.refused(str(e))
        had = self.store.queue_count(name)
        asked = queues
        if queues is None:
            queues = had or api.QUEUES_DEFAULT
        limit = self.store.config.topic_queues_max
        if queues > limit:              # refused before anything is made (a million queues took 7.6 s)
            return api.refused(f"{queues} queues: a topic has at most topic_queues_max={limit}",
                               api.Refusal.LIMIT_EXCEEDED)
        siblings = getattr(self.broker, "siblings", None)
        if siblings is not None:        # a member of `serve --processes N`: the topic is the members' (multi/)
            if groups or kind is not None or policy is not None:
                return api.refused("a topic of `serve --processes N` is made with its name and queues only")
            try:
                n = siblings.create_topic(name, queues)
            except (ValueError, OSError) as e:
                return api.refused(str(e))
            return {"ok": True, "topic": name, "queues": n, "processes": siblings.count,
                    "space_policy": self.store.space_policy(name), "message_type": self.store.message_type(name)}
        if groups:
            if kind is not None:
                return api.refused("message_type is a broker's: create the spread topic without it, then set "
                                   "it with CreateTopic {name, message_type} on each group's leader")
            return self._spread_topic(name, queues, groups, policy)
        try:
            self.store.create_topic(name, queues, policy, kind)
        except (KeyError, ValueError, TypeError) as e:
            return api.refused(str(e))
        out = {"ok": True, "topic": name, "queues": self.store.queue_count(name),
               "space_policy": self.store.space_policy(name), "message_type": self.store.message_type(name)}
        if asked is not None and had > asked:
            out["note"] = (f"topic {name} already has {had} queues; queues are never taken away (asked for "
                           f"{asked}: kept {had})")
        return out

    def _spread_topic(self, name: str, queues: int, groups: list[str], policy: str | None) -> dict:
        """CreateTopic with groups: the queues spread over those broker groups, kept in the coordinator."""
        if policy is not None:
            return api.refused("space_policy is a broker's, not the cluster's: create the spread topic without "
                               "it, then set it with CreateTopic {name, space_policy} on each group's leader")
        node = self._node()
        if node is None or node.coordinator is None:
            return api.refused("spreading a topic over broker groups needs a coordinator (coordinator)",
                               api.Refusal.FORBIDDEN)
        try:
            doc = self._run(asyncio.to_thread(node.coordinator.create_topic, name, queues, groups))
        except ValueError as e:
            return api.refused(str(e))
        return {"ok": True, "topic": name, "queues": queues, "owners": doc["owners"]}

    def list_topics(self, req: dict) -> dict:
        return {"ok": True, "topics": topic_rows(self.store)}

    def disk_status(self, req: dict) -> dict:
        out = {"ok": True, "status": self.store.disk_status()}
        if self.broker is not None and self.broker.observer is not None:
            out["verdict"] = self.broker.observer.verdict()       # the one verdict, alarms included
        return out

    def delete_expired(self, req: dict) -> dict:
        self.store.trigger_delete_expired()
        return {"ok": True}

    def alarms(self, req: dict) -> dict:
        return {"ok": True, "alarms": self.broker.alarm_status()}

    def set_alarm_limits(self, req: dict) -> dict:
        try:
            args = api.alarm_limits(req)
        except (TypeError, ValueError) as e:
            return api.refused(str(e))
        return {"ok": True, "alarms": self.broker.set_alarm_limits(**args)}

    def status(self, req: dict) -> dict:
        return {"ok": True, "status": self.broker.observer.status()}

    def groups(self, req: dict) -> dict:
        from .observe.lag import groups_summary
        try:
            group = api.group_request(req)
        except ValueError as e:
            return api.refused(str(e))
        rows = self.broker.observer.lag(group)
        return {"ok": True, "lag": rows, "groups": groups_summary(rows, self.store),
                **group_admin.shown(self._group_table(), group)}

    def query(self, req: dict) -> dict:
        from .observe.query import query
        limit = self.broker.config.query_messages_max if self.broker is not None else api.QUERY_MAX
        try:
            topic, by, what, n = api.query_request(req, limit)
        except api.LimitError as e:
            return api.refused(str(e), api.Refusal.LIMIT_EXCEEDED)
        except ValueError as e:
            return api.refused(str(e))
        return {"ok": True, "messages": query(self.store, topic, by, what, n)}

    def topic_status(self, req: dict) -> dict:
        from .observe.query import topic_status
        try:
            topic = api.topic_request(req)
        except ValueError as e:
            return api.refused(str(e))
        if self.store.queue_count(topic) == 0:
            return api.refused(f"topic {topic!r} does not exist", api.Refusal.NOT_FOUND)
        lag = self.broker.observer.lag() if self.broker is not None and self.broker.observer is not None else []
        return {"ok": True, **topic_status(self.store, topic, lag)}

    def config(self, req: dict) -> dict:
        from .live_settings import LIVE
        from .observe.query import settings
        b = self.broker
        return {"ok": True, "store": settings(self.store.config),
                "broker": settings(b.config) if b is not None else {}, "live": sorted(LIVE)}

    def set_config(self, req: dict) -> dict:
        """`tidemq config set`: one setting of live_settings.LIVE, checked as `serve` checks it."""
        from .live_settings import SettingError, apply
        try:
            name, value = api.set_config_request(req)
        except ValueError as e:
            return api.refused(str(e))
        if self.broker is None:
            return api.refused("no running broker", api.Refusal.FORBIDDEN)
        try:
            done = apply(self.broker, name, value)
        except SettingError as e:
            code = {"unknown": api.Refusal.UNKNOWN_SETTING, "restart": api.Refusal.RESTART_NEEDED}.get(
                e.kind, api.Refusal.BAD_REQUEST)
            return api.refused(str(e), code)
        return {"ok": True, **done}

    def set_quota(self, req: dict) -> dict:
        """`tidemq quota set`: a user's, client id's or topic's byte rates (protection/quotas.py)."""
        from .protection.quotas import QuotaError
        if (no := self._follower()) is not None:
            return no
        q = getattr(self.broker, "quotas", None) if self.broker is not None else None
        if q is None:
            return api.refused("no running broker", api.Refusal.FORBIDDEN)
        try:
            kind, name, produce, fetch = api.quota_request(req)
            now = q.set(kind, name, produce, fetch)
        except (QuotaError, ValueError) as e:
            return api.refused(str(e))
        return {"ok": True, "entity": f"{kind}:{name}", "quota": now}

    def list_quotas(self, req: dict) -> dict:
        q = getattr(self.broker, "quotas", None) if self.broker is not None else None
        if q is None:
            return {"ok": True, "quotas": {}, "stats": []}
        return {"ok": True, "quotas": q.document(), "stats": [
            {"entity": e, "direction": d, "bytes": s.bytes_total, "throttled": s.throttled_total,
             "throttled_seconds": round(s.throttled_seconds_total, 3), "refused": s.refused_total}
            for (e, d), s in sorted(q.snapshot().items())]}

    def topic_config(self, req: dict) -> dict:
        """`tidemq topic config T [--set k=v ...]`: a topic's own retention, message size limit and
        space policy; kept in topics.json (the broker state a follower copies)."""
        try:
            topic, changes = api.topic_config_request(req)
        except ValueError as e:
            return api.refused(str(e))
        if self.store.queue_count(topic) == 0:
            return api.refused(f"topic {topic!r} does not exist", api.Refusal.NOT_FOUND)
        if changes is not None:
            if (no := self._follower()) is not None:
                return no
            changes = dict(changes)
            policy = changes.pop("space_policy", None)
            if policy is not None and policy not in api.SPACE_POLICIES:
                return api.refused(f"space_policy is one of {', '.join(api.SPACE_POLICIES)}")
            try:
                if changes:
                    self.store.set_topic_settings(topic, changes)
                if policy is not None:
                    self.store.create_topic(topic, self.store.queue_count(topic), policy)
            except KeyError:
                return api.refused(f"topic {topic!r} does not exist", api.Refusal.NOT_FOUND)
            except ValueError as e:
                return api.refused(str(e))
        return {"ok": True, **topic_settings_doc(self.store, topic)}

    def delete_topic(self, req: dict) -> dict:
        """mqadmin deleteTopic: the store forgets the topic; the groups' offsets and pop cursors of
        it go too (a topic created again with the name starts from nothing)."""
        if (no := self._follower()) is not None:
            return no
        try:
            topic = api.topic_request(req)
        except ValueError as e:
            return api.refused(str(e))
        if topic in SYSTEM_TOPICS:
            return api.refused(f"{topic!r} is a system topic of the broker", api.Refusal.FORBIDDEN)
        if isinstance(req, dict) and req.get("forget_topology") is True:
            return self._forget_topology(topic)
        b = self.broker

        def delete() -> dict | None:
            done = self.store.delete_topic(topic)
            if done is not None and b is not None and b.service is not None:
                forget_topic(b.service.group_offsets, b.service.pop, topic)
            return done
        done = self._on_loop(delete)
        if done is None:
            return api.refused(f"topic {topic!r} does not exist", api.Refusal.NOT_FOUND)
        return {"ok": True, **done}

    def _forget_topology(self, topic: str) -> dict:
        """DeleteTopic {"forget_topology": true}: the coordinator forgets a spread topic (sent by
        `topic delete` after every owning group deleted its part: a member that restarts then makes it
        no more)."""
        node = self._node()
        if node is None or node.coordinator is None:
            return api.refused("this broker has no coordinator: there is no cluster topology", api.Refusal.FORBIDDEN)
        if not self._run(asyncio.to_thread(node.coordinator.delete_topic, topic)):
            return api.refused(f"topic {topic!r} is in no cluster topology", api.Refusal.NOT_FOUND)
        return {"ok": True, "topic": topic, "topology": "forgotten"}

    def _on_loop(self, fn):
        """Run ``fn`` where consumers change offsets: on the broker's event loop."""
        b = self.broker
        try:
            asyncio.get_running_loop()
            return fn()
        except RuntimeError:
            if b is None or getattr(b, "_loop", None) is None:
                return fn()
            return asyncio.run_coroutine_threadsafe(_call(fn), b._loop).result(timeout=30)

    def reset_group(self, req: dict) -> dict:
        """Move a group's pull offsets and pop cursors on every queue of a topic, on the broker's
        event loop (where consumers change them too)."""
        if (no := self._follower()) is not None:
            return no
        try:
            group, topic, to, dry_run, force = api.reset_request(req)
        except ValueError as e:
            return api.refused(str(e))
        n = self.store.queue_count(topic)
        if n == 0:
            return api.refused(f"topic {topic!r} does not exist", api.Refusal.NOT_FOUND)
        if isinstance(to, dict) and "timestamp_ms" not in to and max(to) >= n:
            return api.refused(f"topic {topic!r} has queues 0..{n - 1} (offsets names queue {max(to)})")
        b = self.broker
        svc = b.service
        rows = b.observer.lag(group) if b.observer is not None else []
        if not rows:
            return api.refused(f"group {group!r} has consumed nothing on this broker: a reset creates no group",
                               api.Refusal.NOT_FOUND)
        live = live_consumers(rows, b.config.client_idle_s_max)
        if live and not force and not dry_run:
            return api.refused(f"group {group!r} has live consumers (it consumed {', '.join(live)} in the last "
                               f"{b.config.client_idle_s_max:g} s): stop them first, or reset with force",
                               api.Refusal.BUSY)
        done = self._on_loop(lambda: reset_group(self.store, svc.group_offsets, svc.pop, group, topic, to, dry_run))
        return {"ok": True, "reset": done, "dry_run": dry_run, "live": live}

    # Replication (replication/node.py) -----------------------------------------------------
    def _node(self):
        b = self.broker
        return getattr(b, "replication", None) if b is not None else None

    def replication(self, req: dict) -> dict:
        node = self._node()
        return {"ok": True, "replication": node.status() if node is not None else None}

    def _run(self, coro, timeout_s: float = 120):
        return asyncio.run_coroutine_threadsafe(coro, self.broker._loop).result(timeout=timeout_s)

    def promote(self, req: dict) -> dict:
        node = self._node()
        if node is None:
            return api.refused("this broker is in no broker group (broker_group)", api.Refusal.FORBIDDEN)
        try:
            epoch = self._run(node.promote())
        except ValueError as e:
            return api.refused(str(e))
        return {"ok": True, "epoch": epoch}

    def follow(self, req: dict) -> dict:
        node = self._node()
        if node is None:
            return api.refused("this broker is in no broker group (broker_group)", api.Refusal.FORBIDDEN)
        if node.coordinator is not None:
            return api.refused("this group has a coordinator: it says whom to follow", api.Refusal.FORBIDDEN)
        try:
            leader = api.follow_request(req)
        except ValueError as e:
            return api.refused(str(e))
        if leader == node.endpoint:
            return api.refused("a broker cannot follow itself")
        self._run(node.follow(leader))
        return {"ok": True, "leader": leader}

    def cluster(self, req: dict) -> dict:
        node = self._node()
        if node is None:
            return api.refused("this broker is in no broker group (broker_group)", api.Refusal.FORBIDDEN)
        if node.coordinator is None:
            out = {"coordinator": None, "groups": {node.group: node.view()}, "topics": {}}
        else:
            out = dict(node.coordinator.cluster())
        obs = self.broker.observer
        if obs is not None:         # this group as its member book has it: members down too (observe/console.py)
            out["consoles"] = {node.group: group_console(obs.replication())}
        return {"ok": True, "cluster": out}

    # Users and ACLs (protection/acl.py) ----------------------------------------------------
    def _acl(self):
        """(the broker's Acl, None) or (None, the refusal): on a follower, or with authentication off."""
        if (no := self._follower()) is not None:
            return None, no
        acl = getattr(self.broker, "acl", None) if self.broker is not None else None
        if acl is None or not acl.enabled:
            return None, api.refused("authentication is off on this broker (no access_key): users and ACLs "
                                     "would not be checked", api.Refusal.FORBIDDEN)
        return acl, None

    def _acl_read(self):
        acl = getattr(self.broker, "acl", None) if self.broker is not None else None
        if acl is None or not acl.enabled:
            return None, api.refused("authentication is off on this broker (no access_key)", api.Refusal.FORBIDDEN)
        return acl, None

    def create_user(self, req: dict) -> dict:
        from .protection.acl import AclError
        acl, no = self._acl()
        if no is not None:
            return no
        try:
            name, secret, sup = api.user_request(req)
            u = acl.create_user(name, secret, sup)
        except AclError as e:
            return api.refused(str(e), api.Refusal.EXISTS if str(e).endswith("exists") else api.Refusal.BAD_REQUEST)
        except ValueError as e:
            return api.refused(str(e))
        return {"ok": True, "user": {"name": u.name, "super": u.super}}

    def delete_user(self, req: dict) -> dict:
        from .protection.acl import AclError
        acl, no = self._acl()
        if no is not None:
            return no
        try:
            name = api.name_request(req)
            acl.delete_user(name)
        except KeyError:
            return api.refused(f"no user {req.get('name')!r}", api.Refusal.NOT_FOUND)
        except (AclError, ValueError) as e:
            return api.refused(str(e))
        return {"ok": True, "user": name}

    def list_users(self, req: dict) -> dict:
        acl, no = self._acl_read()
        return no if no is not None else {"ok": True, "users": acl.users()}

    def _policy_change(self, req: dict, grant: bool) -> dict:
        from .protection.acl import AclError
        acl, no = self._acl()
        if no is not None:
            return no
        try:
            user, resource, actions, decision, ips = api.acl_request(req)
            if grant:
                ps = acl.grant(user, resource, actions, decision or "allow", ips)
            else:
                if ips is not None:
                    raise ValueError("Revoke takes no source_ips: it takes the actions off every policy on the "
                                     "resource")
                ps = acl.revoke(user, resource, actions, decision)
        except KeyError as e:
            return api.refused(f"no user {e.args[0]!r} (tidemq user create)", api.Refusal.NOT_FOUND)
        except (AclError, ValueError) as e:
            return api.refused(str(e))
        return {"ok": True, "user": user, "policies": ps}

    def grant(self, req: dict) -> dict:
        return self._policy_change(req, True)

    def revoke(self, req: dict) -> dict:
        return self._policy_change(req, False)

    def list_acl(self, req: dict) -> dict:
        acl, no = self._acl_read()
        if no is not None:
            return no
        user = req.get("user") if isinstance(req, dict) else None
        if user is not None and not isinstance(user, str):
            return api.refused("user is a string")
        try:
            return {"ok": True, "policies": acl.policies(user)}
        except KeyError:
            return api.refused(f"no user {user!r}", api.Refusal.NOT_FOUND)
        except ValueError as e:
            return api.refused(str(e))

    # Consumer-group settings (consume/groups.py, consume/group_admin.py) -------------------------
    def _group_table(self):
        b = self.broker
        return b.service.groups if b is not None and getattr(b, "service", None) is not None else None

    def create_group(self, req: dict) -> dict:
        return self._follower() or group_admin.create(self._group_table(), req)

    def update_group(self, req: dict) -> dict:
        return self._follower() or group_admin.update(self._group_table(), req)

    def delete_group(self, req: dict) -> dict:
        return self._follower() or group_admin.delete(self._group_table(), req)

    # Archive (store/archive.py) ------------------------------------------------------------
    def archive(self, req: dict) -> dict:
        return {"ok": True, **archive_summary(self.store.fio, self.store.config.root_dir)}

    def _where(self, ctx) -> str:
        """Where a call comes from: its peer, or for a call a follower forwarded, its client's address
        (protection/forwarded.py: as the member signed it) and the follower's."""
        fwd = getattr(self.broker, "forwarded_for", None)
        client = fwd.peer(ctx.invocation_metadata()) if fwd is not None else None
        return f"{client} (forwarded by {ctx.peer()})" if client else ctx.peer()

    def handler(self) -> grpc.GenericRpcHandler:
        def unary(fn, method):
            def call(req, ctx):
                r = answer(fn, req)
                if method in api.CHANGES and r.get("ok"):
                    audit.info("audit: %s from %s: %s %s", signer(ctx), self._where(ctx), method,
                               json.dumps(api.masked(req), default=str)[:2000])
                return r
            return grpc.unary_unary_rpc_method_handler(call, request_deserializer=api.loads,
                                                       response_serializer=api.dumps)
        fns = {
            api.CREATE_TOPIC: self.create_topic, api.LIST_TOPICS: self.list_topics,
            api.DISK_STATUS: self.disk_status, api.DELETE_EXPIRED: self.delete_expired,
            api.ALARMS: self.alarms, api.SET_ALARM_LIMITS: self.set_alarm_limits,
            api.STATUS: self.status, api.GROUPS: self.groups, api.QUERY: self.query,
            api.TOPIC_STATUS: self.topic_status, api.CONFIG: self.config,
            api.RESET_GROUP: self.reset_group, api.DELETE_TOPIC: self.delete_topic,
            api.ARCHIVE: self.archive, api.REPLICATION: self.replication,
            api.PROMOTE: self.promote, api.FOLLOW: self.follow, api.CLUSTER: self.cluster,
            api.CREATE_USER: self.create_user, api.DELETE_USER: self.delete_user, api.LIST_USERS: self.list_users,
            api.GRANT: self.grant, api.REVOKE: self.revoke, api.LIST_ACL: self.list_acl,
            api.CREATE_GROUP: self.create_group, api.UPDATE_GROUP: self.update_group,
            api.DELETE_GROUP: self.delete_group,
            api.SET_CONFIG: self.set_config, api.TOPIC_CONFIG: self.topic_config,
            api.SET_QUOTA: self.set_quota, api.LIST_QUOTAS: self.list_quotas}
        assert set(fns) == set(api.METHODS)
        return grpc.method_handlers_generic_handler(api.SERVICE, {m: unary(fn, m) for m, fn in fns.items()})


def signer(context) -> str:
    """The access key that signed a call (the guard verified it: protection/access.py), or "anonymous"."""
    for k, v in context.invocation_metadata() or ():
        if k.lower() == AUTH_HEADER and isinstance(v, str):
            try:
                return parse_authorization(v).credential
            except SignatureError:
                break
    return "anonymous"


def answer(fn, req) -> dict:
    """Every admin request gets a typed answer: a refusal for one that is not a JSON request, and
    for one a handler could not take (logged in one line, never a traceback to the caller)."""
    if api.is_bad(req):
        return api.refused("the request is not a JSON object (or is nested too deep)")
    try:
        return fn(req)
    except (KeyError, ValueError, TypeError, OverflowError, RecursionError, AttributeError) as e:
        log.info("admin %s refused a request it could not take: %r", getattr(fn, "__name__", fn), e)
        return api.refused(f"bad request: {type(e).__name__}: {e}")
    except NotDurable as e:
        # written, the directory's fsync failed after the rename (checked.write): taken back, so the
        # version in effect is what is read now, but a crash may bring either back: not OK, and not
        # "nothing changed" either; the same request again writes it (and makes it durable)
        log.warning("admin %s: the change could not be made durable: %s", getattr(fn, "__name__", fn), e)
        return api.refused(f"the broker wrote the change but could not make it durable ({e}); it is not in "
                           "effect now, but a crash may still bring it back: send the same request again",
                           api.Refusal.STATE_NOT_DURABLE)
    except OSError as e:
        # a state file that could not be written (a full disk, an I/O error, its directory gone): every
        # change writes before it takes effect (checked.py keeps the version before), so nothing changed
        log.warning("admin %s: the change could not be written: %s", getattr(fn, "__name__", fn), e)
        return api.refused(f"the broker could not write the change to its disk ({e}); nothing changed",
                           api.Refusal.STATE_WRITE_FAILED)


async def _call(fn):
    return fn()


def forget_topic(offsets, pop, topic: str) -> None:
    """A deleted topic's committed offsets go; its pop cursors go back to 0, nothing in flight."""
    offsets.forget_topic(topic)
    for (g, t, q) in [k for k in pop.queues if k[1] == topic]:
        pop.reset(g, t, q, 0)


def live_consumers(rows: list[dict], idle_s_max: float, now_ms: float | None = None) -> list[str]:
    """The topics a group consumed (a delivery, commit or ack) in the last ``idle_s_max`` seconds:
    its consumers are live (a reset then waits for --force, as kafka-consumer-groups refuses one)."""
    import time
    now_ms = time.time() * 1000 if now_ms is None else now_ms
    return sorted({r["topic"] for r in rows
                   if r.get("last_consumed_ms") is not None and now_ms - r["last_consumed_ms"] < idle_s_max * 1000})


def reset_group(store, offsets, pop, group: str, topic: str, to, dry_run: bool = False) -> list[dict]:
    """kafka-consumer-groups --reset-offsets for one topic: a pull group's committed offsets and
    a pop group's cursors (both when the group consumed both ways; pull when it consumed none).
    ``to``: earliest, latest, an offset, a time in ms (int >= TIMESTAMP_MS_MIN or {"timestamp_ms"}),
    or {queue id: offset} (those queues only). ``dry_run``: the rows, nothing changed. A reset is no
    consumption: the group's last-consumed time stays what it was."""
    keys = set(pop.queues)
    pops = any(g == group and t == topic for (g, t, _q) in keys)
    pulls = any(g == group and t == topic for (g, t, _q) in list(offsets.offsets)) or not pops
    per_queue = isinstance(to, dict) and "timestamp_ms" not in to
    rows = []
    for q in range(store.queue_count(topic)):
        if per_queue and q not in to:
            continue
        lo, hi = store.min_offset(topic, q), store.max_offset(topic, q)
        if per_queue:
            target = min(max(to[q], lo), hi)
        elif isinstance(to, dict):
            target = store.offset_for_timestamp(topic, q, to["timestamp_ms"])
        elif to == "earliest":
            target = lo
        elif to == "latest":
            target = hi
        elif to >= api.TIMESTAMP_MS_MIN:
            target = store.offset_for_timestamp(topic, q, to)
        else:
            target = min(max(to, lo), hi)
        if pulls:
            rows.append({"topic": topic, "queue": q, "kind": "pull", "from": offsets.get(group, topic, q),
                         "to": target})
            if not dry_run:
                at = offsets.committed_at_ms.get((group, topic, q))
                offsets.set(group, topic, q, target)
                if at is None:
                    offsets.committed_at_ms.pop((group, topic, q), None)
                else:
                    offsets.committed_at_ms[(group, topic, q)] = at
        if pops:
            st = pop.queues.get((group, topic, q))
            rows.append({"topic": topic, "queue": q, "kind": "pop", "from": st.committed if st else None,
                         "to": target})
            if not dry_run:
                pop.reset(group, topic, q, target)
    return rows


LIST_UNITS_MAX = 4_096       # a queue's bytes in `topic list`: exact up to this many messages, estimated beyond


def topic_rows(store) -> list[dict]:
    """One row per topic (ListTopics, `tidemq topic list`): queues, messages, bytes (estimated past a
    bounded read per queue), space policy, its own settings, whether it is a broker's system topic."""
    out = []
    for t in store.topic_names():
        queues, nbytes, exact = [], 0, True
        for q in range(store.queue_count(t)):
            queues.append({"id": q, "min_offset": store.min_offset(t, q), "max_offset": store.max_offset(t, q)})
            b, e = store.queue_bytes(t, q, LIST_UNITS_MAX)
            nbytes += b
            exact = exact and e
        s = store.topic_settings(t)
        out.append({"topic": t, "space_policy": store.space_policy(t), "message_type": store.message_type(t),
                    "system": is_system(t),
                    "messages": sum(q["max_offset"] - q["min_offset"] for q in queues), "bytes": nbytes,
                    "bytes_exact": exact, "settings": s.document() if s is not None else {}, "queues": queues})
    return out


def is_system(topic: str) -> bool:
    """The broker's own topics (the timer's schedule topic, the transactions' half topic): not a
    dead-letter topic (%DLQ%G), which its group's operators read."""
    return topic in SYSTEM_TOPICS or topic.lower().startswith("rmq_sys_")


def topic_settings_doc(store, topic: str) -> dict:
    s = store.topic_settings(topic)
    c = store.config
    return {"topic": topic, "settings": {k: getattr(s, k) for k in s.NAMES}, "space_policy": store.space_policy(topic),
            "store": {"retention_hours": c.file_reserved_time_hours, "retention_bytes": None,
                      "max_message_bytes": c.message_body_bytes_max}}
