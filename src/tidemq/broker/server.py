"""Run the broker: a MessageStore and a grpc.aio server over it, stopped cleanly on SIGTERM.

The server listens on BrokerConfig.host (loopback unless configured), with TLS
when a certificate and key are configured, and checks signatures (protection/auth.py)
when an access key is. It serves apache.rocketmq.v2.MessagingService (service.py),
tidemq.Data (SendRecords: produce/send_records.py, PullRecords: consume/pull_records.py)
and tidemq.Admin (admin.py). Background tasks of the loop: the resource alarms
(protection/alarms.py), the timer, the transaction checker, auto-renewal, and the
flush of the broker's state every second.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import socket
import sys
import time
from typing import TYPE_CHECKING

import grpc

from ..config import BrokerConfig, ConfigError, ReplicationConfig, StoreConfig
from ..io import SystemClock
from ..protocol import data
from ..protocol.stubs import sgrpc
from ..store import MessageStore
from .admin import Admin
from .consume.pull_records import Records
from .heap import keep_big_buffers
from .observe.status import Observer
from .produce.send_message import send_message_lane
from .produce.send_records import RecordSends
from .protection.alarms import ResourceAlarms, human, read_rss_bytes, store_disk_reader, total_memory_bytes
from .protection.access import Guard
from .protection.members import MemberCredentials
from .protection.acl import Acl, User
from .protection.auth import Authenticator, Failure, Refusals
from .protection.forwarded import ForwardedFor
from .protection.streams import Bounded, StreamLimits
from .protection.decoding import typed_decoding
from .protection.flow import SendGate
from .protection.quotas import Quotas
from .service import MessagingService
from .state.layout import remake, state_dir

if TYPE_CHECKING:
    from .observe.http import OpsServer

log = logging.getLogger("tidemq.broker")

START_PROGRESS_S = 5.0


class Broker:
    def __init__(self, store_config: StoreConfig, config: BrokerConfig, progress=None,
                 progress_interval_s: float | None = None, replication: ReplicationConfig | None = None) -> None:
        self.store_config = store_config
        self.config = config
        self.replication_config = replication if replication is not None and replication.enabled else None
        self.replication = None                     # replication/node.ReplicationNode in a broker group
        self._service_leading = False               # the current service is a leader's (tasks, state writes)
        self._leader_server: grpc.aio.Server | None = None   # the leader port, while this broker leads
        self._leader_tasks: list[asyncio.Task] = []
        self._leader_port = None                    # replication/forward.LeaderPort of the leader port
        self._records = None
        self._record_sends = None
        self.progress = progress or (lambda line: log.info("%s", line))   # how a long start is said
        self.progress_interval_s = progress_interval_s                    # and how often (None: START_PROGRESS_S)
        self.store: MessageStore | None = None
        self.server: grpc.aio.Server | None = None
        self.service: MessagingService | None = None
        self.alarms: ResourceAlarms | None = None
        self.port = 0
        self.metrics_port = 0
        self.ops: OpsServer | None = None           # the HTTP port: metrics, health, status page
        self.observer: Observer | None = None       # what every status view reads (observe/)
        self._tasks: list[asyncio.Task] = []
        self.gate: SendGate | None = None
        self.acl: Acl | None = None                 # users and policies (protection/acl.py)
        self.quotas: Quotas | None = None           # byte-rate quotas (protection/quotas.py)
        self.refusals = Refusals()                  # calls refused by authentication / authorization
        self.stream_limits: StreamLimits | None = None     # open streams and long polls (protection/streams.py)
        self.forwarded_for: ForwardedFor | None = None     # forwarded calls' clients (authentication on)
        self.member_credentials: MemberCredentials | None = None
    def _make_alarms(self, store: MessageStore) -> ResourceAlarms:
        c, sc = self.config, self.store_config
        def ratios(d: str) -> tuple:            # the store's config now: the ratios change at run time
            cfg = store.config
            return cfg.dir_thresholds().get(os.path.normpath(d), cfg.thresholds())[1:3]
        read = store_disk_reader(store.disk.online_commitlog_dirs, [sc.root_dir, sc.consumequeue_path, sc.index_path],
                                 store.fio.disk_usage, ratios)
        return ResourceAlarms(0, c.disk_free_limit_bytes or 2 * sc.segment_size_bytes, read_rss_bytes, read,
                              SystemClock(),
                              c.alarm_check_interval_ms_min / 1000, c.alarm_check_interval_ms_max / 1000)

    def set_alarm_limits(self, memory_high_watermark_bytes: int | None = None,
                         memory_high_watermark_ratio: float | None = None,
                         disk_free_limit_bytes: int | None = None) -> dict:
        """Change the alarm limits of the running broker (admin SetAlarmLimits); checked at once."""
        if memory_high_watermark_bytes is not None or memory_high_watermark_ratio is not None:
            self._set_memory_limit(memory_high_watermark_bytes or 0,
                                   memory_high_watermark_ratio or self.config.memory_high_watermark_ratio)
        if disk_free_limit_bytes is not None:
            self.alarms.set_limits(disk_free_limit_bytes=disk_free_limit_bytes)
        self.check_alarms_now()                               # the answer shows the new state
        self._loop.call_soon_threadsafe(self._alarm_wake.set)  # and the periodic check starts over
        return self.alarm_status()

    def _set_memory_limit(self, limit_bytes: int, ratio: float) -> None:
        if limit_bytes > 0:
            self.alarms.set_limits(memory_limit_bytes=limit_bytes, memory_limit_doc="memory_high_watermark_bytes")
        else:
            ram = total_memory_bytes()
            self.alarms.set_limits(memory_limit_bytes=int(ram * ratio),
                                   memory_limit_doc=f"memory_high_watermark_ratio {ratio:g} of {human(ram)} RAM")

    def alarm_status(self) -> dict:
        return {**self.alarms.status(), "flow": self.service.gate.status(), "verdict": self.observer.verdict(),
                "auth": self.config.auth_enabled, "tls": self.config.tls_enabled}

    def check_alarms_now(self) -> float:
        """Measure the alarms once; the disk forecast learns whether the disk alarm holds sends
        (its time to the warning ratio is then "now"). Seconds until the next check."""
        interval = self.alarms.check()
        d = self.alarms.disk
        self.store.disk.writes_held = d.message if d.raised else None
        return interval

    async def _check_alarms(self) -> None:
        """Measure, then sleep the interval the alarms ask for (or until the limits change)."""
        while True:
            self._alarm_wake.clear()
            try:
                interval = await asyncio.to_thread(self.check_alarms_now)
            except Exception as e:  # noqa: BLE001 - the checks must go on
                log.error("alarm check failed: %r", e)
                interval = self.config.alarm_check_interval_ms_max / 1000
            try:
                await asyncio.wait_for(self._alarm_wake.wait(), interval)
            except asyncio.TimeoutError:
                pass

    async def _start_store(self, store: MessageStore) -> MessageStore:
        """Start the store in a thread; while it takes long (a recovery), say every
        START_PROGRESS_S what it does and how far it got."""
        task = asyncio.ensure_future(asyncio.to_thread(store.start))
        while True:
            done, _ = await asyncio.wait({task}, timeout=self.progress_interval_s or START_PROGRESS_S)
            if done:
                return task.result()
            self.progress(f"tidemq: starting: {store.start_progress()}")

    async def start(self) -> int:
        if self.config.metrics_port:
            # (imported here: prometheus_client and http.server, for a broker with a metrics port only)
            from .observe.http import Credentials, OpsServer
            try:        # before recovery, so that /readyz can say "recovering"
                c = self.config
                self.ops = OpsServer(c.metrics_host, c.metrics_port,
                                     Credentials(c.metrics_auth_token, c.metrics_auth_user, c.metrics_auth_password),
                                     c.metrics_connections_max, c.metrics_idle_timeout_s)
            except OSError as e:
                raise OSError(f"cannot serve metrics on {self.config.metrics_host}:{self.config.metrics_port}: "
                              f"{e.strerror or e} (metrics_port; 0 turns it off)") from e
            self.metrics_port = self.ops.port
        check_port_free(self.config.host, self.config.port)   # before the store: a second broker touches nothing
        began = time.monotonic()
        self.store = await self._start_store(MessageStore(self.store_config))
        self.store.walk_units_aside()       # a damaged unit's walk of the log never on this loop (unit_repair.py)
        recovery_s = time.monotonic() - began
        c = self.config
        first = User(c.access_key, c.secret_key, True) if c.auth_enabled else None
        self.acl = Acl(self.store.fio, state_dir(self.store_config.root_dir), first).load()
        self.quotas = Quotas(self.store.fio, state_dir(self.store_config.root_dir), SystemClock(),
                             c.quota_throttle_ms_max / 1000)
        self.quotas.load()
        self.member_credentials = MemberCredentials(c)      # how this member calls the others (a group)
        self._loop = asyncio.get_running_loop()
        self._alarm_wake = asyncio.Event()
        self.alarms = self._make_alarms(self.store)
        self._set_memory_limit(self.config.memory_high_watermark_bytes, self.config.memory_high_watermark_ratio)
        self.check_alarms_now()             # the state is known before the first request
        c = self.config
        self.gate = SendGate(self.alarms, self.store.commit_log.dirty_bytes, c.flush_backlog_high_bytes,
                             c.send_hold_ms_max / 1000, c.inflight_requests_per_connection_max,
                             c.inflight_bytes_per_connection_max, SystemClock())
        if self.replication_config is None:
            self._install(MessagingService(self.store, self.config, self.gate, acl=self.acl))
        else:
            from .replication.node import ReplicationNode
            self.replication = ReplicationNode(self, self.replication_config)
        self.store.on_log_failed(lambda f: self._loop.call_soon_threadsafe(self._after_log_failure, f))
        self.server = self._new_server()
        address = f"{c.host}:{c.port}"
        self.port = self._bind(self.server, address)
        if self.port == 0:
            raise OSError(f"cannot listen on {self.config.host}:{self.config.port}: in use, or not an address "
                          f"of this machine (port, host)")
        if self.config.port == 0:
            self.config = self.config.replace(port=self.port)
            if self.service is not None:
                self.service.config = self.config
        await self.server.start()
        self.observer = Observer(self, SystemClock(), recovery_s)
        self.store.observe_flushes(self.observer.flush_latency.observe)
        if self.ops is not None:
            self.ops.ready(self.observer)
        self._tasks = [asyncio.create_task(self._sample()), asyncio.create_task(self._flush_pop()),
                       asyncio.create_task(self._check_alarms())]
        if self.replication is None:
            # it serves its whole log: readers of the files read it whole too (replication/served_end.py)
            from .replication.served_end import forget as forget_served_end
            forget_served_end(self.store.fio, self.store.config.root_dir)
            self._start_leader_tasks()
        else:
            await self.replication.start()
            await self.leader_port(True)
        if self.service is not None:
            self.service.puts.latency = self.observer.put_latency
        return self.port

    def _new_server(self) -> grpc.aio.Server:
        """A gRPC server with every service of this broker (the port, and the leader port)."""
        c = self.config
        opts = [("grpc.max_receive_message_length", c.grpc_message_bytes_max),
                ("grpc.max_send_message_length", c.grpc_message_bytes_max),
                ("grpc.http2.lookahead_bytes", c.grpc_lookahead_bytes),
                ("grpc.so_reuseport", 0)]          # gRPC's default lets a second server share the port
        server = grpc.aio.server(options=opts)
        server.add_generic_rpc_handlers(self._guarded(typed_decoding(self._handlers())))
        return server

    def _guarded(self, handlers: list) -> tuple:
        """``handlers`` behind the guard (protection/access.py: every call authenticated, then authorized,
        before its request is decoded) when authentication is on; as they are when it is off; their
        streams and long polls bounded per connection and per user either way (protection/streams.py)."""
        c = self.config
        if self.stream_limits is None:
            self.stream_limits = StreamLimits(c.streams_per_connection_max, c.streams_per_user_max)
        handlers = [Bounded(list(handlers), self.stream_limits)]       # streams and long polls bounded
        if not c.auth_enabled:
            return tuple(handlers)
        auth = Authenticator(self.acl.secret_of, c.signature_window_s)
        forwarded = self.forwarded_for = ForwardedFor(c.secret_key, c.signature_window_s)   # forwarded calls' clients
        return (Guard(list(handlers), auth, self.acl, self.refusals, forwarded),)

    def _handlers(self) -> list:
        """The generic handlers of every service this broker serves."""
        class Collect:          # what add_*_to_server gives a server, kept
            def __init__(self):
                self.handlers: list = []

            def add_generic_rpc_handlers(self, hs):
                self.handlers.extend(hs)

            def add_registered_method_handlers(self, *_a):
                pass

        got = Collect()
        until_installed = None
        if self.replication is None:
            servicer = self.service
        else:
            from .replication.proxy import ServiceProxy, until_installed
            servicer = ServiceProxy(self)
        lane = send_message_lane(servicer)          # first: SendMessage from its bytes (compiled)
        if lane is not None:
            got.handlers.append(lane)
        sgrpc.add_MessagingServiceServicer_to_server(servicer, got)

        node = self.replication                     # tidemq.Data waits out a change of role too (proxy.py)

        async def installed(ctx) -> None:           # (a change of role's services being built: wait)
            if node is not None and node.installing is not None:
                await until_installed(node, ctx)

        async def pull(req, ctx):
            await installed(ctx)
            return await self._records.pull(req, ctx)

        async def send(req, ctx):
            await installed(ctx)
            return await self._record_sends.send(req, ctx)

        async def send_stream(_requests, ctx):
            await installed(ctx)
            await self._record_sends.stream(ctx)

        async def pull_stream(req, ctx):
            await installed(ctx)
            async for r in self._records.stream(req, ctx):
                yield r

        handlers = got.handlers + [Admin(self.store, self).handler(), grpc.method_handlers_generic_handler(
            data.SERVICE, {data.PULL_RECORDS: grpc.unary_unary_rpc_method_handler(pull),
                           data.SEND_RECORDS: grpc.unary_unary_rpc_method_handler(send),
                           data.SEND_RECORDS_STREAM: grpc.stream_stream_rpc_method_handler(send_stream),
                           data.PULL_RECORDS_STREAM: grpc.unary_stream_rpc_method_handler(pull_stream)})]
        if self.replication is not None:
            handlers.append(self.replication.server.handler())
        return handlers

    def _bind(self, server: grpc.aio.Server, address: str) -> int:
        """Listen on ``address``: TLS when a certificate is configured (client certificates signed by
        tls_client_ca_file required when it is set); the port, or 0 when it cannot be bound."""
        c = self.config
        try:
            if c.tls_enabled:
                with open(c.tls_key_file, "rb") as k, open(c.tls_cert_file, "rb") as crt:
                    pair = (k.read(), crt.read())
                client_ca = None
                if c.tls_client_ca_file:
                    with open(c.tls_client_ca_file, "rb") as f:
                        client_ca = f.read()
                creds = grpc.ssl_server_credentials([pair], root_certificates=client_ca,
                                                    require_client_auth=client_ca is not None)
                return server.add_secure_port(address, creds)
            return server.add_insecure_port(address)
        except RuntimeError:                 # grpc: "Failed to bind"
            return 0

    def _after_log_failure(self, failure) -> None:
        """On the loop, after a failure of this broker's commit log (store/log_failure.py): the
        queues were cut back to its durable end and the next messages take the offsets from there, so
        consumer groups' cursors and deliveries, pull groups' committed offsets, the timer's and the
        transactions' state past the cut (of records served before their fsync, ASYNC_FLUSH, now gone)
        are brought back to it (service.after_log_failure), as a promoted leader's are at its start;
        otherwise every group that had consumed that far would skip the messages acknowledged after
        the failure, for good, and a delayed message or a commit could be lost or taken for another."""
        svc = self.service
        if svc is None:
            return
        if self.replication is None or self._service_leading:
            # (a member that steps down instead builds a follower's service, which serves no consumer;
            # the leader's service built after it does the same at its start)
            try:
                svc.after_log_failure(failure)
            except OSError:                   # the state's files: their next write says it again
                log.exception("the broker's state could not be brought back to the failed log's cut")

    def _install(self, service: MessagingService) -> None:
        """Make ``service`` the one every RPC goes to."""
        c = self.config
        self.service = service
        service.sends.on_forbidden = lambda user, peer, why: self.refusals.refused(Failure.FORBIDDEN, peer, user,
                                                                                   "a send", why)
        self._records = Records(self.store, service.consumption.arrivals, c.grpc_message_bytes_max,
                                c.pull_records_bytes_max, service.got)
        self._records.acl = service.sends.acl       # a stream's pulls checked again (revokes): None when off
        # the quotas: one table for every service this broker has (protection/quotas.py)
        service.sends.quotas = service.pulls.quotas = service.consumption.quotas = self._records.quotas = self.quotas
        service.quotas = self.quotas
        before_put = None
        if self.replication is not None:             # SendRecords waits as SendMessage does (proxy.in_sync)
            from .replication.proxy import in_sync
            before_put = functools.partial(in_sync, self.replication)
        self._record_sends = RecordSends(service.sends, before_put)
        if self.observer is not None:
            service.puts.latency = self.observer.put_latency

    def _start_leader_tasks(self) -> None:
        svc = self.service
        self._leader_tasks = [asyncio.create_task(svc.timer.run()),
                              asyncio.create_task(svc.transactions.run()),
                              asyncio.create_task(svc.renewer.run())]
        self._service_leading = True

    async def _stop_leader_tasks(self) -> None:
        tasks, self._leader_tasks = self._leader_tasks, []
        for t in tasks:
            t.cancel()
        for t in tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping
                pass

    async def activate(self, leading: bool) -> None:
        """A change of role (replication/node.py): the current service goes (a leader's is closed: its
        state written; a follower's is dropped: it wrote nothing), a new one is built from the state
        files, with a leader's tasks and port when ``leading``."""
        await self._stop_leader_tasks()
        old, was_leading = self.service, self._service_leading
        self._service_leading = False
        if old is not None:
            old.closing.set()
            if was_leading:
                await asyncio.to_thread(old.close)
            else:
                old.discard()
        svc = await asyncio.to_thread(MessagingService, self.store, self.config, self.gate, leading,
                                      self.replication, old, self.acl)
        self._install(svc)
        if leading:
            self._start_leader_tasks()

    async def leader_port(self, open_: bool) -> None:
        """Serve the leader port (replication leader_port: served here while this broker leads,
        forwarded to the leader while it follows, replication/forward.py) or stop serving it."""
        port = self.replication_config.leader_port if self.replication_config is not None else 0
        if not port:
            return
        if open_ and self._leader_server is None:
            from .replication.forward import LeaderPort
            c = self.config
            server = grpc.aio.server(options=[("grpc.max_receive_message_length", c.grpc_message_bytes_max),
                                              ("grpc.max_send_message_length", c.grpc_message_bytes_max),
                                              ("grpc.so_reuseport", 0)])
            # while leading, its calls go through the guard as the main port's do (authenticated, then
            # authorized); while following, they are forwarded as they came, signature included, and
            # the leader checks them
            self._leader_port = LeaderPort(self.replication, list(self._guarded(typed_decoding(self._handlers()))))
            server.add_generic_rpc_handlers((self._leader_port,))
            if self._bind(server, f"{c.host}:{port}") == 0:
                raise OSError(f"cannot listen on the leader port {c.host}:{port}: in use (leader_port)")
            await server.start()
            self._leader_server = server
        elif not open_ and self._leader_server is not None:
            server, self._leader_server = self._leader_server, None
            await server.stop(0)
            await self._leader_port.close()

    @property
    def endpoint(self) -> str:
        """This broker's endpoint as its group knows it (advertised_endpoint, else host:port)."""
        c = self.config
        return c.advertised_endpoint or f"{c.host}:{c.port}"

    def write_refusal(self) -> str | None:
        """Why this broker takes no writes as a member of its group (None: it takes them)."""
        return self.replication.write_refusal() if self.replication is not None else None

    async def _sample(self) -> None:
        """The status history (rates, the status page's chart): one sample per interval."""
        while True:
            try:
                await asyncio.to_thread(self.observer.tick)
            except Exception as e:  # noqa: BLE001 - sampling must go on
                log.error("status sample failed: %r", e)
            await asyncio.sleep(self.config.status_sample_interval_s)

    async def _flush_pop(self) -> None:
        """The pop and transaction journals are fsynced every second (kill -9 loses nothing
        without it; power loss)."""
        while True:
            await asyncio.sleep(1.0)
            if not self._service_leading:
                continue                    # a follower's state is the leader's copy: it writes none
            svc = self.service
            for flush in (lambda: remake(self.store.fio, self.store_config.root_dir), svc.pop.flush,
                          svc.group_offsets.flush, svc.transactions.flush):
                try:                        # each on its own: one failing never keeps the others from disk
                    flush()
                except OSError as e:
                    log.error("pop / transaction journal or consumer offsets flush failed: %s", e)

    async def stop(self) -> None:
        if self.ops is not None:
            self.ops.stopping()
        if self.replication is not None:
            await self.replication.stop()
        await self._stop_leader_tasks()
        await self.leader_port(False)
        for t in getattr(self, "_tasks", ()):
            t.cancel()
        for t in getattr(self, "_tasks", ()):
            try:
                await t
            except asyncio.CancelledError:
                pass
        if self.service is not None:
            self.service.closing.set()       # long-lived streams end now; unary calls get the grace
        if self.server is not None:
            await self.server.stop(self.config.shutdown_grace_s)
        if self.service is not None:
            if self._service_leading:
                self.service.close()
            else:
                self.service.discard()
        if self.store is not None:
            await asyncio.to_thread(self.store.shutdown)
        if self.ops is not None:
            self.ops.close()


def check_port_free(host: str, port: int) -> None:
    """OSError (one line) when ``host:port`` cannot be bound: another broker (or anything) has it.
    gRPC would otherwise share the port through SO_REUSEPORT and split the clients between two
    stores. (Port 0: any free port, nothing to check.)"""
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise OSError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)    # as gRPC: TIME_WAIT is no conflict
        try:
            sock.bind(addr)
        except OSError as e:
            raise OSError(f"cannot listen on {host}:{port}: {e.strerror} (another broker? choose --port)") from None


async def serve(store_config: StoreConfig, config: BrokerConfig, ready=print, progress=None,
                progress_interval_s: float | None = None, replication: ReplicationConfig | None = None) -> None:
    """Serve until SIGTERM / SIGINT; then stop RPCs, flush and close the store. ``progress``: how
    a long start is said (default: logged), every ``progress_interval_s`` (default START_PROGRESS_S);
    ``replication``: a broker group's settings."""
    await run_until_stopped(Broker(store_config, config, progress, progress_interval_s, replication), ready)


async def run_until_stopped(broker: "Broker", ready=print, who: str = "") -> None:
    """Start ``broker``, say it is ready (``who``: what it is, said after the port), serve until
    SIGTERM / SIGINT, then stop it cleanly."""
    config = broker.config
    keep_big_buffers(config.malloc_keep_bytes)         # process-wide: here, not in Broker (tests embed one)
    sys.setswitchinterval(config.thread_switch_interval_us / 1e6)     # process-wide too
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        port = await broker.start()
        extras = "".join(f", {x}" for x, on in (("TLS", config.tls_enabled), ("authentication", config.auth_enabled))
                         if on)
        if broker.metrics_port:
            extras += f", metrics on {config.metrics_host}:{broker.metrics_port}"
        ready(f"tidemq broker ready on {config.host}:{port} ({who}store {broker.store_config.root_dir}{extras})")
        await stop.wait()
    finally:
        await broker.stop()


def event_loop_runner(kind: str):
    """How ``serve`` is run: ``asyncio.run`` on asyncio's own loop, or on uvloop's (BrokerConfig.event_loop).
    grpc.aio's per-call work is mostly event-loop calls (futures, call_soon, tasks): on uvloop the
    official client's one-message SendMessage costs the broker ~40 us less CPU (bench/README.md)."""
    if kind == "asyncio":
        return asyncio.run
    try:
        import uvloop
    except ImportError:
        raise ConfigError("event_loop = uvloop, but uvloop is not installed (pip install uvloop, "
                      "or set event_loop = asyncio / TIDEMQ_EVENT_LOOP=asyncio)") from None
    return uvloop.run
