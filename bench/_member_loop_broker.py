"""``python -m _member_loop_broker serve ...``: tidemq's broker with its replication stream served on
a thread of its own -- its own uvloop and grpc.aio server, on the broker's port + ``OFFSET`` -- and a
follower opening its stream there (Epochs and State stay on the broker's port): the wave-9 probe
(bench/README.md, 32.3), whether a follower's ACK handled without queuing behind the client calls
on the broker's loop releases a SYNC put sooner. Patched, not changed: ``Broker.start`` (the leader
starts the thread once it has started) and ``GrpcChannel`` (the stream goes to the other port).
A measurement, not a design: that port has no guard, no TLS and no stream limits, so a broker with
authentication or TLS on refuses to start with it; nothing stops the thread but the process's end.
With ``BENCH_TRACE_OUT`` set, bench/_traced_broker.py's timestamps too (bench/replication_hops.py).
"""

import asyncio
import os
import threading

import grpc

from tidemq.broker import server as broker_server
from tidemq.broker.replication import transport

OFFSET = 1000                  # the stream's port: the broker's + this (both members agree on it)

_start = broker_server.Broker.start


def _serve_stream(broker, port: int, started: threading.Event, failed: list) -> None:
    import uvloop
    c = broker.config

    async def main() -> None:
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", c.grpc_message_bytes_max),
                                          ("grpc.max_send_message_length", c.grpc_message_bytes_max),
                                          ("grpc.http2.lookahead_bytes", c.grpc_lookahead_bytes),
                                          ("grpc.so_reuseport", 0)])
        server.add_generic_rpc_handlers((broker.replication.server.handler(),))
        if server.add_insecure_port(f"{c.host}:{port}") == 0:
            failed.append(f"cannot listen on {c.host}:{port} (the broker's port + {OFFSET})")
            started.set()
            return
        await server.start()
        started.set()
        await server.wait_for_termination()
    uvloop.run(main())


async def _start_with_member_loop(self) -> int:
    if self.config.auth_enabled or self.config.tls_enabled:
        raise SystemExit("_member_loop_broker: a measurement without authentication and TLS only")
    port = await _start(self)
    if self.replication is not None:
        started, failed = threading.Event(), []
        threading.Thread(target=_serve_stream, args=(self, port + OFFSET, started, failed), daemon=True).start()
        await asyncio.to_thread(started.wait)
        if failed:
            raise SystemExit(f"_member_loop_broker: {failed[0]}")
    return port


_channel_init = transport.GrpcChannel.__init__


def _channel_init_with_member_port(self, endpoint: str, creds) -> None:
    _channel_init(self, endpoint, creds)
    host, _, port = endpoint.rpartition(":")
    self._stream_ch = creds.channel(f"{host}:{int(port) + OFFSET}", transport.CHANNEL_OPTIONS)


async def _channel_exit(self, *exc) -> None:
    await self._ch.close()
    await self._stream_ch.close()


def _stream(self) -> transport.GrpcStream:
    return transport.GrpcStream(self._stream_ch.stream_stream(transport.rp.STREAM_PATH)(
        metadata=self.creds.metadata()))


broker_server.Broker.start = _start_with_member_loop
transport.GrpcChannel.__init__ = _channel_init_with_member_port
transport.GrpcChannel.__aexit__ = _channel_exit
transport.GrpcChannel.stream = _stream

if __name__ == "__main__":
    if os.environ.get("BENCH_TRACE_OUT"):
        import _traced_broker
        threading.Thread(target=_traced_broker._dump, daemon=True).start()
    from tidemq.cli.main import cli
    cli()
