"""Run the broker: a MessageStore and a grpc.aio server over it, stopped cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import signal

import grpc

from ..config import BrokerConfig, StoreConfig
from ..store import MessageStore
from .proto import sgrpc
from .admin import Admin
from .service import MessagingService

log = logging.getLogger("tidemq.broker")


class Broker:
    def __init__(self, store_config: StoreConfig, config: BrokerConfig) -> None:
        self.store_config = store_config
        self.config = config
        self.store: MessageStore | None = None
        self.server: grpc.aio.Server | None = None
        self.service: MessagingService | None = None
        self.port = 0

    async def start(self) -> int:
        self.store = await asyncio.to_thread(MessageStore(self.store_config).start)
        opts = [("grpc.max_receive_message_length", self.config.grpc_max_message_bytes),
                ("grpc.max_send_message_length", self.config.grpc_max_message_bytes)]
        self.server = grpc.aio.server(options=opts)
        self.service = MessagingService(self.store, self.config)
        sgrpc.add_MessagingServiceServicer_to_server(self.service, self.server)
        self.server.add_generic_rpc_handlers((Admin(self.store).handler(),))
        self.port = self.server.add_insecure_port(f"{self.config.host}:{self.config.port}")
        if self.port == 0:
            raise OSError(f"cannot listen on {self.config.host}:{self.config.port}")
        if self.config.port == 0:
            self.config = self.config.replace(port=self.port)
            self.service.config = self.config
        await self.server.start()
        self._tasks = [asyncio.create_task(self._flush_pop()),
                       asyncio.create_task(self.service.timer.run(in_thread=self.store_config.sync_flush)),
                       asyncio.create_task(self.service.transactions.run())]
        return self.port

    async def _flush_pop(self) -> None:
        """The pop and transaction journals are fsynced every second (kill -9 loses nothing
        without it; power loss)."""
        while True:
            await asyncio.sleep(1.0)
            try:
                self.service.pop.flush()
                self.service.group_offsets.flush()
                self.service.transactions.flush()
            except OSError as e:
                log.error("pop / transaction journal or consumer offsets flush failed: %s", e)

    async def stop(self) -> None:
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
            self.service.close()
        if self.store is not None:
            await asyncio.to_thread(self.store.shutdown)


async def serve(store_config: StoreConfig, config: BrokerConfig, ready=print) -> None:
    """Serve until SIGTERM / SIGINT; then stop RPCs, flush and close the store."""
    broker = Broker(store_config, config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        port = await broker.start()
        ready(f"tidemq broker ready on {config.host}:{port} (store {store_config.root_dir})")
        await stop.wait()
    finally:
        await broker.stop()
