"""A broker group's settings (``[replication]``): ReplicationConfig."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Mapping

from .coordinator import AddressError, parse
from .loading import KIB, MIB, ConfigError, Loadable
from .loading import setting as _f

@dataclass(frozen=True)
class ReplicationConfig(Loadable):
    """A broker group: one leader and its followers, each a `tidemq serve` with its own store root
    (RocketMQ's HA model; tidemq/broker/replication/). The default (no ``broker_group``) is the
    embedded set-up: one broker, no replication, no coordinator."""

    SECTION: ClassVar[str] = "replication"
    RETIRED: ClassVar[Mapping[str, str]] = {
        "in_sync_lag_bytes_max": "a follower is in sync by time now (replica_lag_time_max_ms), not by bytes behind",
    }

    broker_group: str = _f("", "name of this broker's group (empty: no group, no replication: one broker)")
    broker_id: str = _f("", "this broker's name within its group (empty: its endpoint host:port)")
    broker_role: str = _f("leader", "static role without a coordinator: 'leader' or 'follower' (--role); with "
                                    "a coordinator the role is elected", choices=("leader", "follower"))
    leader_endpoint: str = _f("", "HOST:PORT of the leader a static follower replicates from (--leader)")
    replication_mode: str = _f("ASYNC", "SYNC: a put is acknowledged once every follower of the in-sync set has "
                                        "it (on disk where they run SYNC_FLUSH), and consumers are served only what "
                                        "they all have (the high watermark); ASYNC: after the local write, the lag "
                                        "reported (a failover may take back what the new leader had not copied, "
                                        "and a consumer may have read it)", choices=("ASYNC", "SYNC"))
    in_sync_replicas_min: int = _f(1, "SYNC: the in-sync set must hold at least this many followers: fewer, a put "
                                      "is refused before anything is written with HA_NOT_AVAILABLE (the store's "
                                      "SLAVE_NOT_AVAILABLE); a put that waited while the set shrank below it is "
                                      "answered as timed out (appended: its resend is not stored twice)", 1, 16)
    replication_timeout_ms: int = _f(3_000, "SYNC: a put the in-sync set has not confirmed by then answers "
                                            "SLAVE_PERSISTENCE_TIMEOUT (the store's FLUSH_SLAVE_TIMEOUT; it stays "
                                            "in the log, and its resend is not stored twice)", 1, 600_000)
    replica_lag_time_max_ms: int = _f(2_000, "a follower of the in-sync set that has not been caught up (had "
                                             "everything the leader had at some moment) for this long is dropped "
                                             "from the set (from the coordinator's record first, then SYNC puts go "
                                             "on without it); one caught up within it comes back (Kafka's "
                                             "replica.lag.time.max.ms). Keep it below replication_timeout_ms so a "
                                             "stopped follower costs SYNC puts a wait, not a timeout", 50, 600_000)
    replication_frame_bytes_max: int = _f(1 * MIB, "commit-log bytes one replication frame carries at most "
                                                   "(whole records; a larger record goes alone)", 4 * KIB, 64 * MIB)
    replication_state_interval_ms: int = _f(1_000, "how often a follower copies the leader's broker state "
                                                   "(topics, consumer offsets, pop state, timer, transactions)",
                                            10, 600_000)
    replication_retry_ms: int = _f(200, "a follower that lost its leader connects again after this", 10, 60_000)
    leader_port: int = _f(0, "port served only while this broker leads its group: the group's write endpoint "
                             "(official clients list every member's; gRPC's pick_first finds the leader); 0: none",
                          0, 65535)
    coordinator: str = _f("", "ZooKeeper for automatic failover, '[digest:USER@]HOST:PORT[,HOST:PORT...][/chroot]' "
                              "(empty: static roles, `tidemq replication promote` by hand; chroot default "
                              "/tidemq; USER: ZooKeeper digest authentication, with coordinator_password)")
    coordinator_password: str = _f("", "password of the coordinator's digest USER (never in `coordinator` itself)",
                                   secret=True)
    coordinator_session_timeout_ms: int = _f(6_000, "ZooKeeper session timeout: a leader silent this long loses "
                                                    "its lease (within the server's min/max session timeout, 2 and "
                                                    "20 ticks by default: the server may not grant less)",
                                             400, 600_000)
    leader_lease_ratio: float = _f(0.5, "a leader acknowledges writes only until its last confirmed coordinator "
                                        "request plus this fraction of coordinator_session_timeout_ms (checked on "
                                        "every write, ASYNC too): below 1, so that it stops before its session can "
                                        "expire and another member be elected; the rest is the margin for the "
                                        "clocks' rates and a write's time between its check and its answer",
                                   0.1, 0.9)
    leader_port_forward_timeout_ms: int = _f(3_000, "a call a following member forwards to its leader through the "
                                                    "leader port gets at most this long (or the client's deadline), "
                                                    "then UNAVAILABLE, which the clients retry: a stopped leader "
                                                    "costs them this, not their whole deadline", 100, 600_000)
    election_wait_ms: int = _f(1_000, "after the leader's lease is gone, how long the members post their log "
                                      "ends before the most up-to-date one takes the lease", 0, 600_000)

    def __post_init__(self) -> None:
        self._check()
        if not self.broker_group:
            alone = [f"{k} ({flag})" for k, flag, v in (
                ("broker_role follower", "--role", self.broker_role == "follower"),
                ("leader_endpoint", "--leader", self.leader_endpoint), ("leader_port", "--leader-port", self.leader_port),
                ("coordinator", "--coordinator", self.coordinator)) if v]
            if alone:
                raise ConfigError(f"{', '.join(alone)} only mean something in a broker group: give broker_group "
                                  f"(--group NAME), or leave them out for one broker without replication")
        if self.coordinator:
            try:
                addr = parse(self.coordinator)
            except AddressError as e:
                raise ConfigError(str(e)) from None
            if addr.user and not self.coordinator_password:
                raise ConfigError(f"coordinator user {addr.user!r} needs coordinator_password "
                                  "(TIDEMQ_COORDINATOR_PASSWORD, or the config file)")
        if self.broker_group and not self.coordinator and self.broker_role == "follower" \
                and not self.leader_endpoint:
            raise ConfigError("broker_role follower without a coordinator needs leader_endpoint (--leader HOST:PORT)")

    @property
    def enabled(self) -> bool:
        return bool(self.broker_group)

    @property
    def sync(self) -> bool:
        return self.replication_mode == "SYNC"
