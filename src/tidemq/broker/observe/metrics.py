"""Prometheus metrics of a running broker, read from the Observer at scrape time: nothing is
counted twice and the hot path pays nothing but the put-latency bucket (latency.py).

    tidemq_messages_put_total{topic,status}   messages sent since start by the status they were answered:
                                              OK, TOO_MANY_REQUESTS (held then refused, or refused by the
                                              store), DUPLICATE, ... (outcomes.py; topic "": no such topic)
    tidemq_messages_got_total{topic,status}   messages handed to consumers since start: OK, REDELIVERED,
                                              DEAD_LETTERED (outcomes.py)
    tidemq_bytes_in_total / _bytes_out_total  commit-log bytes appended / message bytes read
    tidemq_sends_held_total / _refused_total  sends held by flow control / refused by it
    tidemq_put_latency_seconds                histogram of store puts (one per request)
    tidemq_flush_latency_seconds              histogram of commit-log flushes (fsync)
    tidemq_writes_refused{reason}             1 while the store refuses writes (DISK_FULL, ARCHIVE_PENDING,
                                              ...), one series per reason; reason="" 0 while it does not
    tidemq_writes_held{reason}                1 while sends are held, then refused with TOO_MANY_REQUESTS
                                              (MEMORY_ALARM, DISK_ALARM, FLUSH_BACKLOG); reason="" 0 else
    tidemq_alarm{resource}                    1 while the memory / disk alarm is raised
    tidemq_disk_used_ratio{dir,state}         used fraction of each store directory
    tidemq_disk_forecast_seconds{dir,ratio}   time until a directory (or all) reaches 75 / 85 / 90 %
    tidemq_segments_deleted_bytes_total       commit-log bytes cleanup has deleted
    tidemq_segments_deleted_total{reason}     segments deleted: expired, or space (before expiry)
    tidemq_cleanup_not_freed_total{reason}    rounds with space short and nothing deleted, by why
    tidemq_group_messages_evicted_total{group,topic}  messages cleanup deleted before a subscribed group
                                              consumed them (space_policy=evict, or expired)
    tidemq_consumer_lag_messages{group,topic,queue}
    tidemq_flushes_total / _flush_seconds_total  commit-log fsyncs and the time they took (the histogram
                                              above has their spread)
    tidemq_recovery_seconds                   how long the store took to start
    tidemq_records_damaged_total              records read but not served: they fail their CRC
    tidemq_replication_leader{group}          1 while this broker leads its group (unfenced), 0 else
    tidemq_replication_epoch{group}           the epoch it leads (or last knew)
    tidemq_replication_lag_bytes{group,member}    per follower (on the leader), and this broker's own
    tidemq_replication_lag_seconds{group,member}  lag (on a follower, member = itself)
    tidemq_replication_in_sync{group,member}  1 while a follower is in sync (on the leader)
    tidemq_replication_sync_timeouts_total{group}  SYNC puts answered FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE
    tidemq_replication_members{group,state}   members this broker knows by state: leader, follower, down (seen
                                              live since it started, gone now: members.py)
    tidemq_replication_member_up{group,member}  1 while a known member is live, 0 while it is down
    tidemq_replication_leader_changes_total{group}  elections seen since start (epochs passed)
    tidemq_replication_leader_age_seconds{group}  seconds since the group's leader last changed (at start: since
                                              this broker first saw it)
    tidemq_coordinator_connected{group}       1 while the coordinator's session is connected
    tidemq_coordinator_session_timeout_seconds{group,kind}  the session timeout asked, and the one granted
    rocketmq_*                                RocketMQ 5's names for the same counts (metrics_rocketmq_aliases):
                                              messages_in_total{topic}, messages_out_total{topic},
                                              throughput_in_total, throughput_out_total,
                                              consumer_lag_messages{consumer_group,topic}, topic_number,
                                              consumer_group_number
    tidemq_auth_failures_total{reason}        calls refused by authentication (no_signature, malformed,
                                              unknown_key, bad_signature, stale) or authorization (forbidden)
    tidemq_quota_bytes_total{entity,direction}   bytes under a quota (entity user:U, client:C, topic:T;
                                              direction produce, fetch); _quota_throttled_total and
                                              _quota_throttled_seconds_total: answers delayed and for how
                                              long; _quota_refused_total: refused past the bound
    tidemq_up                                 1
"""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from .verdict import STORE


class BrokerCollector(Collector):
    def __init__(self, observer) -> None:
        self.observer = observer

    def collect(self):
        o = self.observer
        st = o.status()
        yield GaugeMetricFamily("tidemq_up", "the broker answers", value=1)
        put = CounterMetricFamily("tidemq_messages_put", "messages sent since start, by topic and the status "
                                  "they were answered (OK: stored)", labels=["topic", "status"])
        for (t, status), n in sorted(o.put_outcomes().items()):
            put.add_metric([t, status], n)
        yield put
        got = CounterMetricFamily("tidemq_messages_got", "messages handed to consumers since start, by topic and "
                                  "status (OK, REDELIVERED, DEAD_LETTERED)", labels=["topic", "status"])
        for (t, status), n in sorted(o.got_outcomes().items()):
            got.add_metric([t, status], n)
        yield got
        tot = st["totals"]
        yield CounterMetricFamily("tidemq_bytes_in", "commit-log bytes appended", value=tot["bytes_in"])
        yield CounterMetricFamily("tidemq_bytes_out", "message bytes read since start", value=tot["bytes_out"])
        yield CounterMetricFamily("tidemq_sends_held", "sends held by flow control", value=tot["held"])
        yield CounterMetricFamily("tidemq_sends_refused", "sends refused by flow control", value=tot["refused"])
        lat = o.put_latency
        yield HistogramMetricFamily("tidemq_put_latency_seconds", "store put time per request",
                                    buckets=lat.cumulative(), sum_value=lat.sum_s)
        fl = o.flush_latency
        yield HistogramMetricFamily("tidemq_flush_latency_seconds", "commit-log flush (fsync) time",
                                    buckets=fl.cumulative(), sum_value=fl.sum_s)
        reasons = st["verdict"]["reasons"]
        refused = GaugeMetricFamily("tidemq_writes_refused", "1 while the store refuses writes, one series per "
                                    "reason (reason=\"\" 0 while it does not)", labels=["reason"])
        held = GaugeMetricFamily("tidemq_writes_held", "1 while sends are held, then refused with "
                                 "TOO_MANY_REQUESTS (an alarm, the flush backlog), one series per reason "
                                 "(reason=\"\" 0 while none)", labels=["reason"])
        for family, mine in ((refused, [r for r in reasons if r["source"] == STORE]),
                             (held, [r for r in reasons if r["source"] != STORE])):
            if not mine:
                family.add_metric([""], 0)
            for r in mine:
                family.add_metric([r["code"]], 1)
        yield refused
        yield held
        alarm = GaugeMetricFamily("tidemq_alarm", "1 while a resource alarm is raised", labels=["resource"])
        for name, a in st["alarms"].items():
            alarm.add_metric([name], 1 if a["raised"] else 0)
        yield alarm
        disk = st["disk"]
        used = GaugeMetricFamily("tidemq_disk_used_ratio", "used fraction of a store directory's file system",
                                 labels=["dir", "role", "state"])
        for d in disk["directories"]:
            used.add_metric([d["path"], d["role"], d["state"]], d["used_ratio_percent"] / 100)
        yield used
        fc = GaugeMetricFamily("tidemq_disk_forecast_seconds", "seconds until a directory (dir=\"all\": the "
                               "commit-log disks together) reaches a ratio at the pace its file system filled over "
                               "the last minute; 0: reached, or (the warning ratio) writes refused or held by the "
                               "disk alarm; absent: not at this pace", labels=["dir", "ratio"])
        for ratio, s in disk["forecast"]["seconds_until_percent"].items():
            if s is not None:
                fc.add_metric(["all", ratio], s)
        for d in disk["directories"]:
            for ratio, s in (d.get("seconds_until_percent") or {}).items():
                if s is not None:
                    fc.add_metric([d["path"], ratio], s)
        yield fc
        yield CounterMetricFamily("tidemq_segments_deleted_bytes", "commit-log bytes deleted by cleanup",
                                  value=disk["commitlog"]["deleted_bytes_total"])
        cl = disk["commitlog"]
        deleted = CounterMetricFamily("tidemq_segments_deleted", "commit-log segments deleted by cleanup, by reason "
                                      "(expired, or space: deleted before it expired)", labels=["reason"])
        for reason, n in cl["deleted_segments_by_reason"].items():
            deleted.add_metric([reason], n)
        yield deleted
        not_freed = CounterMetricFamily("tidemq_cleanup_not_freed", "cleanup rounds that found space short and "
                                        "could delete nothing, by reason", labels=["reason"])
        for reason, n in cl["not_freed_rounds_by_reason"].items():
            not_freed.add_metric([reason], n)
        yield not_freed
        evicted = CounterMetricFamily("tidemq_group_messages_evicted", "messages cleanup deleted before a subscribed "
                                      "group consumed them, since start (space_policy=evict, or expired)",
                                      labels=["group", "topic"])
        for e in cl.get("evicted_by_group", []):
            evicted.add_metric([e["group"], e["topic"]], e["messages"])
        yield evicted
        lag = GaugeMetricFamily("tidemq_consumer_lag_messages", "messages a group has not consumed",
                                labels=["group", "topic", "queue"])
        lag_rows = o.lag()
        for r in lag_rows:
            lag.add_metric([r["group"], r["topic"], str(r["queue"])], r["lag"])
        yield lag
        stats = o.store.stats()
        yield CounterMetricFamily("tidemq_flushes", "commit-log flushes (fsync)", value=stats["fsyncs"])
        yield CounterMetricFamily("tidemq_flush_seconds", "time spent in commit-log flushes (rate / flushes rate: "
                                  "mean flush latency)", value=stats["fsync_seconds"])
        yield CounterMetricFamily("tidemq_records_damaged", "records read but not served since start: they fail "
                                  "their CRC (skipped; `tidemq verify` names them)", value=stats["records_damaged"])
        yield GaugeMetricFamily("tidemq_recovery_seconds", "time the store took to start",
                                value=st["recovery"]["seconds"])
        refusals = getattr(getattr(o, "broker", None), "refusals", None)
        if refusals is not None:
            af = CounterMetricFamily("tidemq_auth_failures", "calls refused since start: by authentication (who: "
                                     "UNAUTHORIZED) or authorization (reason forbidden: what, FORBIDDEN)",
                                     labels=["reason"])
            for reason, n in refusals.snapshot().items():
                af.add_metric([reason], n)
            yield af
        quotas = getattr(getattr(o, "broker", None), "quotas", None)
        if quotas is not None:
            yield from _quotas(quotas.snapshot())
        rep = st.get("replication")
        if rep:
            yield from _replication(rep)
        if getattr(getattr(getattr(o, "broker", None), "config", None), "metrics_rocketmq_aliases", False):
            yield from _rocketmq_aliases(o, st, lag_rows)


def _quotas(stats: dict):
    """Per quota entity (user:U, client:C, topic:T) and direction (produce, fetch)."""
    labels = ["entity", "direction"]
    fams = {
        "bytes_total": CounterMetricFamily("tidemq_quota_bytes", "bytes sent or fetched under a quota", labels=labels),
        "throttled_total": CounterMetricFamily("tidemq_quota_throttled", "requests whose answer a quota delayed",
                                               labels=labels),
        "throttled_seconds_total": CounterMetricFamily("tidemq_quota_throttled_seconds", "time answers were delayed "
                                                       "by a quota", labels=labels),
        "refused_total": CounterMetricFamily("tidemq_quota_refused", "requests refused TOO_MANY_REQUESTS: past the "
                                             "quota's bound (quota_throttle_ms_max)", labels=labels),
    }
    for (e, d), st in sorted(stats.items()):
        for k, fam in fams.items():
            fam.add_metric([e, d], getattr(st, k))
    yield from fams.values()


def _replication(rep: dict):
    g = rep["group"]
    leader = GaugeMetricFamily("tidemq_replication_leader", "1 while this broker leads its group", labels=["group"])
    leader.add_metric([g], 1 if rep["role"] == "leader" else 0)
    yield leader
    epoch = GaugeMetricFamily("tidemq_replication_epoch", "the epoch this broker leads or last knew", labels=["group"])
    epoch.add_metric([g], rep["epoch"] or rep["known_epoch"])
    yield epoch
    lag_b = GaugeMetricFamily("tidemq_replication_lag_bytes", "bytes a follower is behind the leader's log",
                              labels=["group", "member"])
    lag_s = GaugeMetricFamily("tidemq_replication_lag_seconds", "seconds since a follower last had the leader's "
                              "whole log (0 while it has)", labels=["group", "member"])
    ins = GaugeMetricFamily("tidemq_replication_in_sync", "1 while a follower is in sync", labels=["group", "member"])
    for f in rep.get("followers") or ():
        lag_b.add_metric([g, f["member"]], f["lag_bytes"])
        lag_s.add_metric([g, f["member"]], f["lag_seconds"])
        ins.add_metric([g, f["member"]], 1 if f["in_sync"] else 0)
    r = rep.get("replica")
    if r:
        lag_b.add_metric([g, rep["member"]], r["lag_bytes"])
        lag_s.add_metric([g, rep["member"]], (r["since_last_frame_s"] or 0.0) if r["lag_bytes"] else 0.0)
    yield lag_b
    yield lag_s
    yield ins
    yield _counter("tidemq_replication_sync_timeouts", "SYNC puts not confirmed by enough followers in time", g,
                   rep.get("sync_timeouts", 0))
    console = rep.get("console")
    if console:
        members = GaugeMetricFamily("tidemq_replication_members", "members of the group this broker knows, by "
                                    "state: leader, follower, down (seen live since it started, gone now)",
                                    labels=["group", "state"])
        for state, n in console["counts"].items():
            members.add_metric([g, state], n)
        yield members
        up = GaugeMetricFamily("tidemq_replication_member_up", "1 while a member this broker knows is live, 0 while "
                               "it is down", labels=["group", "member"])
        for m in console["members"]:
            up.add_metric([g, m["member"]], 0 if m["state"] == "down" else 1)
        yield up
        yield _counter("tidemq_replication_leader_changes", "elections seen since this broker started (epochs "
                       "passed)", g, console["leader_changes"])
        if console.get("leader_for_s") is not None:
            age = GaugeMetricFamily("tidemq_replication_leader_age_seconds", "seconds since the group's leader last "
                                    "changed (at start: since this broker first saw it lead)", labels=["group"])
            age.add_metric([g], console["leader_for_s"])
            yield age
    session = rep.get("coordinator_session")
    if session:
        conn = GaugeMetricFamily("tidemq_coordinator_connected", "1 while the coordinator's session is connected",
                                 labels=["group"])
        conn.add_metric([g], 1 if session["state"] == "connected" else 0)
        yield conn
        to = GaugeMetricFamily("tidemq_coordinator_session_timeout_seconds", "the coordinator session timeout asked, "
                               "and the one the coordinator granted", labels=["group", "kind"])
        to.add_metric([g, "asked"], session["session_timeout_ms_asked"] / 1000)
        if session.get("session_timeout_ms_granted"):
            to.add_metric([g, "granted"], session["session_timeout_ms_granted"] / 1000)
        yield to


def _rocketmq_aliases(o, st: dict, lag_rows: list[dict]):
    """RocketMQ 5's names (its broker's metrics, 5.1+) for what tidemq counts the same way."""
    ins: dict[str, int] = {}
    for (t, status), n in o.put_outcomes().items():
        if status == "OK" and t:
            ins[t] = ins.get(t, 0) + n
    fam = CounterMetricFamily("rocketmq_messages_in", "tidemq_messages_put_total{status=\"OK\"} under "
                              "RocketMQ 5's name", labels=["topic"])
    for t, n in sorted(ins.items()):
        fam.add_metric([t], n)
    yield fam
    outs: dict[str, int] = {}
    for (t, status), n in o.got_outcomes().items():
        if status in ("OK", "REDELIVERED"):
            outs[t] = outs.get(t, 0) + n
    fam = CounterMetricFamily("rocketmq_messages_out", "tidemq_messages_got_total{status=~\"OK|REDELIVERED\"} "
                              "under RocketMQ 5's name", labels=["topic"])
    for t, n in sorted(outs.items()):
        fam.add_metric([t], n)
    yield fam
    tot = st["totals"]
    yield CounterMetricFamily("rocketmq_throughput_in", "tidemq_bytes_in_total under RocketMQ 5's name (bytes)",
                              value=tot["bytes_in"])
    yield CounterMetricFamily("rocketmq_throughput_out", "tidemq_bytes_out_total under RocketMQ 5's name (bytes)",
                              value=tot["bytes_out"])
    lag: dict[tuple[str, str], int] = {}
    for r in lag_rows:
        k = (r["group"], r["topic"])
        lag[k] = lag.get(k, 0) + r["lag"]
    fam = GaugeMetricFamily("rocketmq_consumer_lag_messages", "tidemq_consumer_lag_messages summed over queues, "
                            "under RocketMQ 5's name", labels=["consumer_group", "topic"])
    for (grp, t), n in sorted(lag.items()):
        fam.add_metric([grp, t], n)
    yield fam
    yield GaugeMetricFamily("rocketmq_topic_number", "topics (system topics aside)", value=st["topics"])
    yield GaugeMetricFamily("rocketmq_consumer_group_number", "consumer groups with offsets", value=st["groups"])


def _counter(name: str, doc: str, group: str, value: int):
    c = CounterMetricFamily(name, doc, labels=["group"])
    c.add_metric([group], value)
    return c


def registry_for(observer) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(BrokerCollector(observer))
    return reg
