"""The broker's settings (``[broker]``): BrokerConfig."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import ClassVar, Mapping

from .loading import KIB, MIB, ConfigError, Loadable, is_loopback
from .loading import setting as _f

log = logging.getLogger("tidemq.config")

@dataclass(frozen=True)
class BrokerConfig(Loadable):
    """The broker (tidemq/broker/): its ports, consumers, delayed and transactional messages, the
    resource alarms and flow control (RabbitMQ's model), authentication and TLS, and a ``_max``
    on everything a client can make it hold or do per round."""

    SECTION: ClassVar[str] = "broker"
    RENAMED: ClassVar[Mapping[str, str]] = {
        "grpc_max_message_bytes": "grpc_message_bytes_max",
        "max_delivery_attempts": "delivery_attempts_max",
        "long_polling_max_s": "long_polling_s_max",
        "auto_renew_max_s": "auto_renew_s_max",
        "client_idle_max_s": "client_idle_s_max",
        "send_dedup_window": "send_dedup_window_entries",
        "timer_max_delay_s": "timer_delay_s_max",
        "send_hold_max_ms": "send_hold_ms_max",
        "alarm_check_interval_max_ms": "alarm_check_interval_ms_max",
        "alarm_check_interval_min_ms": "alarm_check_interval_ms_min",
    }
    RETIRED: ClassVar[Mapping[str, str]] = {
        "send_records_tag_cache_max": "SendRecords checks each message's tags in one pass; nothing is cached",
        "send_executor_threads": "no put runs on a thread: SYNC replication's puts await their followers on the "
                                 "event loop (broker/puts.py)",
    }
    # auto-creation moved to [store] (one meaning, one default): read there, not here
    MOVED_OUT: ClassVar[frozenset[str]] = frozenset({"auto_create_topics", "default_queue_count"})

    host: str = _f("127.0.0.1", "address the gRPC server binds (loopback unless configured)")
    port: int = _f(8081, "gRPC port (0: any free port)", 0, 65535)
    metrics_port: int = _f(8082, "HTTP port of /metrics (Prometheus), /healthz, /readyz and the status page / "
                                 "(0: off)", 0, 65535)
    metrics_host: str = _f("127.0.0.1", "address the metrics port binds: loopback unless configured, whatever "
                                        "the gRPC host (the status page and /status.json show the store's paths "
                                        "and settings): off loopback it needs metrics_auth_token or "
                                        "metrics_auth_user, or metrics_allow_unauthenticated")
    metrics_auth_token: str = _f("", "bearer token /metrics, /status.json and the status page require "
                                     "(Authorization: Bearer TOKEN: Prometheus's `authorization` scrape option); "
                                     "/healthz and /readyz stay open", secret=True)
    metrics_auth_user: str = _f("", "user of HTTP basic authentication on the metrics port (with "
                                    "metrics_auth_password: Prometheus's `basic_auth`)")
    metrics_auth_password: str = _f("", "password of metrics_auth_user", secret=True)
    metrics_allow_unauthenticated: bool = _f(False, "serve the metrics port on a metrics_host off loopback without "
                                                    "a credential (refused at start otherwise)")
    metrics_rocketmq_aliases: bool = _f(True, "also serve RocketMQ 5's metric names for what tidemq counts the same "
                                              "way (rocketmq_messages_in_total, rocketmq_consumer_lag_messages, ...: "
                                              "docs/operating.md), so RocketMQ dashboards read a tidemq broker")
    metrics_connections_max: int = _f(64, "connections the metrics port keeps open at most (one more is closed at "
                                          "once)", 1, 100_000)
    metrics_idle_timeout_s: float = _f(30.0, "a metrics-port connection that sends nothing for this long is closed",
                                       0.1, 3_600.0)
    status_history_s: float = _f(6 * 3_600.0, "how far back the status page's disk chart reaches (one sample "
                                              "per status_sample_interval_s)", 60.0, 7 * 86_400.0)
    status_forecast_window_s: float = _f(1_800.0, "the status page's disk forecast is the trend of the samples of "
                                                "this window, with its uncertainty (the metric and the alerts use "
                                                "the store's one-minute pace)", 60.0, 7 * 86_400.0)
    status_sample_interval_s: float = _f(10.0, "how often disk usage and the rates are sampled for the status "
                                               "page and `tidemq status`", 0.1, 3_600.0)
    advertised_endpoint: str = _f("", "host:port given to clients in routes when they did not say how they reached us")
    broker_name: str = _f("tidemq", "broker name in routes")
    processes: int = _f(1, "broker processes `tidemq serve` runs on this machine (1: one, the default; N > 1: N "
                           "members, each its own store under <root>/p<i> and port port+i, one cluster to clients, "
                           "a topic's queues split among them: broker/multi/, bench/README.md 32.4)", 1, 64)
    grpc_message_bytes_max: int = _f(4 * MIB + 512 * KIB, "largest gRPC message accepted (max body + headroom)",
                                     64 * KIB, 256 * MIB)
    grpc_lookahead_bytes: int = _f(4 * MIB, "HTTP/2 flow-control window a stream may receive ahead "
                                   "(grpc.http2.lookahead_bytes): a large batch arrives without waiting for "
                                   "window updates (a do-nothing grpc.aio server: ~300 us less CPU per 256 KiB request)",
                                   64 * KIB, 256 * MIB)
    event_loop: str = _f("uvloop", "the event loop the broker runs on: uvloop (libuv's; the official client's "
                                   "one-message sends cost the broker ~40 us less CPU each, bench/README.md) or "
                                   "asyncio's own", choices=("uvloop", "asyncio"))
    dispatch_delay_ms: int = _f(20, "how long after a send's answer its consume-queue / index dispatch may wait, so that "
                                "the dispatches of every send answered meanwhile are written as one (store/put_lock.py; "
                                "a read of the store dispatches what waits first: never seen later; 0: at the event "
                                "loop's next turn)", 0, 1_000)
    malloc_keep_bytes: int = _f(128 * MIB, "freed memory glibc's malloc keeps for the next big buffer (a pull "
                                "answer and gRPC's copy of it: up to 16 MiB each) instead of mapping fresh "
                                "pages each time; it stays resident (0: glibc's defaults; broker/heap.py)",
                                0, 4096 * MIB)
    thread_switch_interval_us: int = _f(500, "how long a thread holding the GIL runs before one waiting for it "
                                        "may (sys.setswitchinterval; Python's own: 5000): a SYNC put's round trip "
                                        "to its followers crosses threads of both brokers (gRPC's, the event loop's, "
                                        "the store's), each a wait for the GIL (bench/README.md 32.3: SYNC 0.85 x "
                                        "against 0.65 x with 5000, medians of 5 pairs on a loaded machine)",
                                        50, 100_000)
    shutdown_grace_s: float = _f(5.0, "seconds in-flight RPCs get at shutdown", 0.0, 600.0)
    delivery_attempts_max: int = _f(16, "deliveries of a message before it goes to %DLQ%<group>, for a group "
                                        "without its own retry_max (`tidemq group create G --retry-max N`: N + 1); "
                                        "consumers are told max_attempts = this", 1, 1000)
    fifo_consumer_groups: tuple[str, ...] = _f((), "consumer groups that consume in order (RocketMQ's "
                                               "consumeMessageOrderly): a queue gives such a group its next "
                                               "message only once the ones handed out are acked or dead-lettered; "
                                               "the default for groups without their own setting (`tidemq group "
                                               "create G --orderly/--not-orderly` wins); 'a,b'")
    invisible_duration_default_s: float = _f(30.0, "invisible time of a pop that gives none", 1.0, 43_200.0)
    auto_renew_ahead_s: float = _f(10.0, "a message received with auto_renew (the push consumers) is renewed this "
                                         "long before its invisible time ends, while its client is alive (the "
                                         "RocketMQ proxy's renewAheadTimeMillis); kept under auto_renew_step_s",
                                   0.05, 3_600.0)
    auto_renew_step_s: float = _f(60.0, "invisible time one renewal gives, from now", 0.1, 43_200.0)
    auto_renew_s_max: float = _f(3 * 3_600.0, "renewal of a message stops this long after it was received; its "
                                              "invisible time then runs out and it is delivered again (the proxy's "
                                              "renewMaxTimeMillis)", 1.0, 7 * 86_400.0)
    auto_renew_check_interval_ms: int = _f(1_000, "how often auto-renewed messages are looked at (renewed, or "
                                                  "released when their client is gone)", 10, 60_000)
    client_idle_s_max: float = _f(30.0, "a client with no Telemetry stream open that sent no heartbeat or receive "
                                        "for this long is gone (the official clients heartbeat every 10 s)",
                                  1.0, 3_600.0)
    receive_batch_max: int = _f(256, "messages one ReceiveMessage returns at most", 1, 10_000)
    long_polling_s_max: float = _f(30.0, "longest a ReceiveMessage or PullMessage waits for messages", 0.0, 600.0)
    send_dedup_window_entries: int = _f(100_000, "recent (topic, message id) pairs a resent message is recognised by "
                                "(at least this many, at most twice; 0: off)",
                                0, 10_000_000)
    send_dedup_after_restart_s: float = _f(300.0, "for this long after a start, a message id the in-memory window "
                                                  "does not know is looked up in the store's index (sends stored "
                                                  "this long before the start count): a retry across a restart or "
                                                  "kill -9 is answered, not stored twice; 0: off", 0.0, 86_400.0)
    transaction_check_interval_s: float = _f(30.0, "a half message undecided this long (since stored or last checked) "
                                                   "is checked with a producer over Telemetry", 0.05, 86_400.0)
    transaction_check_max: int = _f(15, "orphan checks of a half message before it is discarded "
                                        "(RocketMQ transactionCheckMax)", 1, 1000)
    transaction_undecided_max: int = _f(100_000, "undecided half messages held at most; a TRANSACTION send beyond "
                                                 "is refused (TOO_MANY_REQUESTS)", 1, 10_000_000)
    timer_delay_s_max: float = _f(3 * 86_400.0, "furthest delivery time of a DELAY message from now (RocketMQ "
                                                "timerMaxDelaySec); keep it under the store's retention",
                                  1.0, 365 * 86_400.0)
    timer_pending_max: int = _f(1_000_000, "delayed messages waiting at most (~100 bytes of memory each); a DELAY "
                                           "send beyond is refused (TOO_MANY_REQUESTS)", 1, 100_000_000)
    transaction_recovery_s_max: float = _f(86_400.0, "longest orphaned_transaction_recovery_duration a TRANSACTION "
                                                     "message may ask for (its first orphan check); a longer one "
                                                     "waits this long", 1.0, 30 * 86_400.0)
    # Lite topics (RIP-83) and priority messages
    lite_topic_bytes_max: int = _f(64, "longest lite topic name (ILLEGAL_LITE_TOPIC beyond; Telemetry's "
                                       "max_lite_topic_size)", 1, 127)
    lite_subscriptions_per_client_max: int = _f(1000, "lite topics one lite consumer may subscribe "
                                                      "(LITE_SUBSCRIPTION_QUOTA_EXCEEDED beyond; Telemetry's "
                                                      "lite_subscription_quota)", 1, 100_000)
    lite_subscriptions_per_user_max: int = _f(2_000, "lite consumers' subscriptions (group, bind topic, client) "
                                                     "of one user kept at most (authentication on): one more is "
                                                     "refused (LITE_SUBSCRIPTION_QUOTA_EXCEEDED), so that no user "
                                                     "fills the broker's table (10000) for the others",
                                              1, 10_000)
    priority_window_messages: int = _f(256, "new messages of a queue a receive looks at to hand out the higher "
                                            "priorities first (a topic with PRIORITY messages; FIFO groups "
                                            "excepted)", 1, 65_536)

    # Resource alarms (RabbitMQ's model): sends are held, then refused; receives, pulls, acks go on
    memory_high_watermark_ratio: float = _f(0.4, "memory alarm when the broker's resident memory (anonymous: mapped "
                                                 "commit-log pages excluded) passes this fraction of RAM (or of "
                                                 "the cgroup's limit)", 0.01, 0.95)
    memory_high_watermark_bytes: int = _f(0, "memory alarm limit in bytes of resident memory; > 0 replaces "
                                             "memory_high_watermark_ratio", 0, 1 << 50)
    disk_free_limit_bytes: int = _f(0, "disk alarm when free space under a store directory falls under this; 0: two "
                                       "commit-log segments (2 GiB with the default segment_size_bytes; RabbitMQ's "
                                       "50 MB would not hold the next segment)", 0, 1 << 50)
    alarm_check_interval_ms_max: int = _f(10_000, "longest time between two alarm checks, far from the limits "
                                                  "(nearer them the checks come more often, down to "
                                                  "alarm_check_interval_ms_min)",
                                          10, 600_000)
    alarm_check_interval_ms_min: int = _f(100, "shortest time between two alarm checks, at the limits",
                                          10, 600_000)
    quota_throttle_ms_max: int = _f(30_000, "longest a send or fetch over its quota (`tidemq quota set`) is delayed "
                                            "before its answer; one whose debt would take longer is refused "
                                            "TOO_MANY_REQUESTS (Kafka's quota throttling)", 0, 600_000)
    send_hold_ms_max: int = _f(2_000, "longest a send waits on an alarm or the flush backlog before it is refused "
                                      "with TOO_MANY_REQUESTS (never past its deadline minus 0.25 s)", 0, 60_000)
    log_level: str = _f("", "level of the broker's own log (tidemq.*): DEBUG, INFO, WARNING, ERROR; empty: as the "
                            "command says (WARNING, INFO with -v); changes at run time (`tidemq config set`)",
                        choices=("", "DEBUG", "INFO", "WARNING", "ERROR"))
    # Flow control
    flush_backlog_high_bytes: int = _f(256 * MIB, "sends are held while more commit-log bytes than this are written "
                                                  "but not yet flushed (ASYNC_FLUSH; dispatch is inline and cannot "
                                                  "lag)", 4 * KIB, 1 << 50)
    inflight_requests_per_connection_max: int = _f(256, "sends in flight on one connection; more: TOO_MANY_REQUESTS",
                                                   1, 1_000_000)
    inflight_bytes_per_connection_max: int = _f(64 * MIB, "message body bytes in flight on one connection; more: "
                                                          "TOO_MANY_REQUESTS", 1, 1 << 40)
    send_messages_per_request_max: int = _f(4_096, "messages one SendMessage request may carry (a store Message "
                                                   "each on its general path: 4.5 MiB of tiny ones were ~300k, "
                                                   "seconds of the event loop); more: PAYLOAD_TOO_LARGE, nothing "
                                                   "stored", 1, 1_000_000)
    # Authentication and TLS
    access_key: str = _f("", "access key; with secret_key set, every call must carry a valid MQv2-HMAC-SHA1 "
                             "signature (else UNAUTHORIZED)")
    secret_key: str = _f("", "secret key the clients sign x-mq-date-time with (give it through TIDEMQ_SECRET_KEY "
                             "or a TOML file only the broker reads)", secret=True)
    signature_window_s: float = _f(900.0, "a signed request's x-mq-date-time must be this close to the broker's "
                                          "clock, read as UTC or as local time (the Python client's); older is "
                                          "refused as a replay", 1.0, 7 * 86_400.0)
    tls_cert_file: str = _f("", "PEM certificate (chain): with tls_key_file, the port speaks TLS only")
    tls_key_file: str = _f("", "PEM private key of tls_cert_file")
    tls_ca_file: str = _f("", "PEM of the CA(s) that signed the group's certificates: what a member trusts when it "
                              "connects to another (replication, the leader port's forwarding); empty: "
                              "tls_cert_file itself (one self-signed certificate for the whole group)")
    tls_client_ca_file: str = _f("", "PEM of the CA(s) whose client certificates the ports require: a client "
                                     "without one signed by them is refused at the TLS handshake (members show "
                                     "their tls_cert_file); empty: no client certificate asked for")

    # Bounds on what clients can make the broker remember or do per round
    clients_max: int = _f(10_000, "client ids whose liveness is remembered at most (least recently heard from "
                                  "first; never one with an open Telemetry stream or lite subscriptions)",
                          16, 10_000_000)
    clients_per_user_max: int = _f(2_000, "the same, of one user (authentication on): past it the user's own "
                                          "are forgotten first", 1, 10_000_000)
    telemetry_outbox_max: int = _f(1_024, "commands queued for one Telemetry stream at most", 16, 1_000_000)
    telemetry_known_clients_max: int = _f(10_000, "client ids whose Telemetry settings are remembered at most",
                                          16, 10_000_000)
    streams_per_connection_max: int = _f(256, "Telemetry streams and long polls (ReceiveMessage, PullMessage, "
                                              "PullRecords, PullRecordsStream, SendRecordsStream) open at once on one "
                                              "connection; one more: TOO_MANY_REQUESTS", 1, 1_000_000)
    streams_per_user_max: int = _f(4_096, "the same, of one user across its connections (authentication on)",
                                   1, 10_000_000)
    state_journal_compact_bytes: int = _f(16 * MIB, "a broker state journal (pop state, transactions) larger than "
                                                    "this is compacted into its snapshot", 64 * KIB, 1 << 40)
    timer_round_messages_max: int = _f(1_024, "DELAY messages read or moved per timer round at most", 1, 1_000_000)
    transaction_scan_max: int = _f(1_024, "half messages read per transaction-check round at most", 1, 1_000_000)
    transaction_checks_per_round_max: int = _f(256, "orphan checks sent per round at most", 1, 1_000_000)
    pull_message_bytes_max: int = _f(64 * MIB, "message bytes one PullMessage answers at most", 64 * KIB, 1 << 40)
    pull_records_bytes_max: int = _f(64 * MIB, "record bytes one PullRecords answers at most", 64 * KIB, 1 << 40)
    query_messages_max: int = _f(64, "messages one admin Query answers at most (asking for more: LIMIT_EXCEEDED)",
                                 1, 10_000)
    ack_entries_max: int = _f(1_024, "receipt handles one AckMessage may carry (the official clients send one); "
                                     "more: PAYLOAD_TOO_LARGE, nothing acked", 1, 1_000_000)
    invisible_duration_s_max: float = _f(43_200.0, "longest invisible time a ReceiveMessage or "
                                                   "ChangeInvisibleDuration may ask for (the RocketMQ proxy's 12 h); "
                                                   "more, or none > 0: ILLEGAL_INVISIBLE_TIME", 1.0, 7 * 86_400.0)

    def __post_init__(self) -> None:
        self._check()
        if self.auto_renew_ahead_s >= self.auto_renew_step_s:
            ahead = self.auto_renew_step_s / 2
            log.warning("config auto_renew_ahead_s=%r is not under auto_renew_step_s=%r (every check would renew); "
                        "using %r", self.auto_renew_ahead_s, self.auto_renew_step_s, ahead)
            object.__setattr__(self, "auto_renew_ahead_s", ahead)
        if bool(self.access_key) != bool(self.secret_key):
            raise ConfigError("access_key and secret_key go together: set both (authentication) or neither")
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ConfigError("tls_cert_file and tls_key_file go together: set both (TLS) or neither")
        if (self.tls_ca_file or self.tls_client_ca_file) and not self.tls_cert_file:
            raise ConfigError("tls_ca_file / tls_client_ca_file need TLS on (tls_cert_file and tls_key_file)")
        if bool(self.metrics_auth_user) != bool(self.metrics_auth_password):
            raise ConfigError("metrics_auth_user and metrics_auth_password go together: set both or neither")
        if self.metrics_port and not is_loopback(self.metrics_host) and not self.metrics_auth_required \
                and not self.metrics_allow_unauthenticated:
            raise ConfigError(f"metrics_host {self.metrics_host!r} is not loopback and the metrics port has no "
                              f"credential: set metrics_auth_token (or metrics_auth_user / metrics_auth_password), "
                              f"or metrics_allow_unauthenticated = true to serve it open")

    @property
    def metrics_auth_required(self) -> bool:
        return bool(self.metrics_auth_token or self.metrics_auth_user)

    @property
    def auth_enabled(self) -> bool:
        return bool(self.access_key)

    @property
    def tls_enabled(self) -> bool:
        return bool(self.tls_cert_file)
