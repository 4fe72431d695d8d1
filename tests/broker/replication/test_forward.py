"""broker/replication/forward.py: the leader port over real gRPC servers on loopback. A member
that leads serves it with its own handlers; one that follows forwards every call to its leader,
bytes, metadata, trailing metadata and status as they are, unary and streamed; while no leader is
known it answers UNAVAILABLE. QueryRoute is the leader's too, and the member's own while no leader
answers it. The "leader" here is a gRPC server of raw-bytes methods."""

import asyncio
from types import SimpleNamespace

import grpc
import pytest

from tidemq.broker.replication.forward import LeaderPort

ECHO = "/apache.rocketmq.v2.MessagingService/SendMessage"          # unary
PULL = "/apache.rocketmq.v2.MessagingService/PullMessage"          # unary -> stream
TELEMETRY = "/apache.rocketmq.v2.MessagingService/Telemetry"       # stream -> stream
BROKEN = "/apache.rocketmq.v2.MessagingService/AckMessage"         # answers an error status
SILENT = "/apache.rocketmq.v2.MessagingService/QueryAssignment"    # never answers (a stopped leader)
ROUTE = "/apache.rocketmq.v2.MessagingService/QueryRoute"          # unary, answered as ECHO is


class Handlers(grpc.GenericRpcHandler):
    """Raw-bytes methods answering with ``name`` (which server answered), the request and the
    client's ``x-client`` metadata."""

    def __init__(self, name: str) -> None:
        self.name = name.encode()
        self.entered = asyncio.Event()          # SILENT was called

    def service(self, details):
        name = self.name

        def client(context):
            return dict(context.invocation_metadata()).get("x-client", "").encode()

        async def echo(request, context):
            context.set_trailing_metadata((("x-served-by", name.decode()),))
            return b"|".join([name, request, client(context)])

        async def pull(request, context):
            for i in range(3):
                yield b"%s:%s:%d" % (name, request, i)
            if request == b"then fail":
                await context.abort(grpc.StatusCode.DATA_LOSS, "gone after 3")

        async def telemetry(requests, context):
            async for r in requests:
                yield name + b"<" + r

        async def broken(request, context):
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no such handle")

        entered = self.entered

        async def silent(request, context):
            entered.set()
            await asyncio.Event().wait()

        return {SILENT: grpc.unary_unary_rpc_method_handler(silent), ECHO: grpc.unary_unary_rpc_method_handler(echo),
                ROUTE: grpc.unary_unary_rpc_method_handler(silent if name == b"silent" else echo),
                PULL: grpc.unary_stream_rpc_method_handler(pull),
                TELEMETRY: grpc.stream_stream_rpc_method_handler(telemetry),
                BROKEN: grpc.unary_unary_rpc_method_handler(broken)}.get(details.method)


async def serve(*handlers) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(handlers)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


def run_with_member(check, leading=False, leader=True, forward_timeout_ms=60_000):
    """A leader server, a member serving LeaderPort(node) ahead of its own handlers; check(node,
    port, channel to the member's port, leader endpoint) runs on the loop (node.handlers: the
    leader's)."""
    async def main():
        handlers = Handlers("leader")
        lead_server, lead_ep = await serve(handlers)
        node = SimpleNamespace(leading=leading, fenced=None, leader_endpoint=lead_ep if leader else None, group="g",
                               config=SimpleNamespace(leader_port_forward_timeout_ms=forward_timeout_ms),
                               role_changed=asyncio.Event(), handlers=handlers)
        port = LeaderPort(node, [Handlers("member")])
        member, member_ep = await serve(port)
        try:
            async with grpc.aio.insecure_channel(member_ep) as ch:
                await check(node, port, ch, lead_ep)
        finally:
            await port.close()
            await member.stop(None)
            await lead_server.stop(None)
    asyncio.run(main())


def test_a_follower_forwards_a_unary_call_with_its_metadata_and_trailers():
    async def check(node, port, ch, lead_ep):
        call = ch.unary_unary(ECHO)(b"hello", metadata=(("x-client", "c-1"),), timeout=60)
        assert await call == b"leader|hello|c-1"
        assert ("x-served-by", "leader") in tuple(await call.trailing_metadata())
        assert port.forwarded == 1
    run_with_member(check)


def test_a_follower_forwards_streams_both_ways():
    async def check(node, port, ch, lead_ep):
        got = [r async for r in ch.unary_stream(PULL)(b"q0", timeout=60)]
        assert got == [b"leader:q0:0", b"leader:q0:1", b"leader:q0:2"]

        async def requests():
            for r in (b"a", b"b"):
                yield r
        got = [r async for r in ch.stream_stream(TELEMETRY)(requests(), timeout=60)]
        assert got == [b"leader<a", b"leader<b"]
    run_with_member(check)


def test_the_leaders_error_status_reaches_the_client_as_it_is():
    async def check(node, port, ch, lead_ep):
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await ch.unary_unary(BROKEN)(b"x", timeout=60)
        assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION and e.value.details() == "no such handle"
        got = []
        with pytest.raises(grpc.aio.AioRpcError) as e:
            async for r in ch.unary_stream(PULL)(b"then fail", timeout=60):
                got.append(r)
        assert len(got) == 3, "what came before the error came through"
        assert e.value.code() == grpc.StatusCode.DATA_LOSS and e.value.details() == "gone after 3"
    run_with_member(check)


def test_a_leader_serves_with_its_own_handlers():
    async def check(node, port, ch, lead_ep):
        assert await ch.unary_unary(ECHO)(b"hi", timeout=60) == b"member|hi|"
        assert [r async for r in ch.unary_stream(PULL)(b"q", timeout=60)][0] == b"member:q:0"
        assert port.forwarded == 0
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await ch.unary_unary("/no.Such/Method")(b"", timeout=60)
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    run_with_member(check, leading=True)


def test_a_change_of_role_is_followed_on_the_same_connection():
    async def check(node, port, ch, lead_ep):
        assert (await ch.unary_unary(ECHO)(b"1", timeout=60)).startswith(b"leader|")
        node.leading = True
        assert (await ch.unary_unary(ECHO)(b"2", timeout=60)).startswith(b"member|")
        node.leading = False
        assert (await ch.unary_unary(ECHO)(b"3", timeout=60)).startswith(b"leader|")
    run_with_member(check)


def test_without_a_known_leader_the_answer_is_unavailable():
    async def check(node, port, ch, lead_ep):
        for call in (ch.unary_unary(ECHO)(b"x", timeout=60), ch.unary_stream(PULL)(b"x", timeout=60)):
            with pytest.raises(grpc.aio.AioRpcError) as e:
                if isinstance(call, grpc.aio.UnaryStreamCall):
                    [r async for r in call]
                else:
                    await call
            assert e.value.code() == grpc.StatusCode.UNAVAILABLE and "no leader is elected yet" in e.value.details()
        assert port.forwarded == 0
    run_with_member(check, leader=False)


def test_a_new_leader_gets_a_new_channel():
    async def check(node, port, ch, lead_ep):
        other, other_ep = await serve(Handlers("other"))
        try:
            assert (await ch.unary_unary(ECHO)(b"1", timeout=60)).startswith(b"leader|")
            node.leader_endpoint = other_ep
            assert (await ch.unary_unary(ECHO)(b"2", timeout=60)).startswith(b"other|")
            assert list(port._channels) == [other_ep]
        finally:
            await other.stop(None)
    run_with_member(check)


def test_tidemqs_own_streamed_methods_are_forwarded_as_streams():
    """A follower's leader port forwards a method as the kind it is: the Data streams too."""
    from tidemq.broker.replication.forward import STREAMING
    from tidemq.protocol import data
    assert STREAMING[data.SEND_RECORDS_STREAM_PATH] == "stream_stream"
    assert STREAMING[data.PULL_RECORDS_STREAM_PATH] == "unary_stream"
    assert data.SEND_RECORDS_PATH not in STREAMING and data.PULL_RECORDS_PATH not in STREAMING      # unary


def test_a_fenced_member_never_answers_from_its_own_services():
    async def check(node, port, ch, lead_ep):
        node.fenced, node.leader_endpoint = "the coordinator's session is suspended", "127.0.0.1:1"
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await ch.unary_unary(ECHO)(b"x", timeout=60)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE      # retried by the clients, never "fenced"
    run_with_member(check, leading=True)


def test_a_leader_that_does_not_answer_costs_the_forward_timeout_not_the_clients_deadline():
    async def check(node, port, ch, lead_ep):
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await ch.unary_unary(SILENT)(b"x", timeout=600)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE and "leader_port_forward_timeout_ms" in e.value.details()
    run_with_member(check, forward_timeout_ms=300)


def test_a_forwarded_call_ends_when_the_member_follows_another_leader():
    async def check(node, port, ch, lead_ep):
        call = ch.unary_unary(SILENT)(b"x", timeout=600)
        await node.handlers.entered.wait()        # the call reached the (silent) leader
        node.role_changed.set()                   # this member now follows another leader
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await call
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE and "leader changed" in e.value.details()
    run_with_member(check)


def test_a_follower_asks_its_leader_for_a_route():
    async def check(node, port, ch, lead_ep):
        assert await ch.unary_unary(ROUTE)(b"r", metadata=(("x-client", "c-1"),), timeout=60) == b"leader|r|c-1"
        assert port.forwarded == 1 and port.routes_answered == 0
    run_with_member(check)


def test_a_route_no_leader_answers_is_the_followers_own():
    """No leader known (an election), the leader gone (killed: refused), the leader silent (stopped):
    the member answers the route itself (routes.py: the group's, the same from every member)."""
    async def check(node, port, ch, lead_ep):
        node.leader_endpoint = ""
        assert await ch.unary_unary(ROUTE)(b"1", metadata=(("x-client", "c"),), timeout=60) == b"member|1|c"
        gone, gone_ep = await serve(Handlers("gone"))
        await gone.stop(None)
        node.leader_endpoint = gone_ep
        assert await ch.unary_unary(ROUTE)(b"2", timeout=60) == b"member|2|"
        silent, silent_ep = await serve(Handlers("silent"))
        try:
            node.leader_endpoint = silent_ep
            assert await ch.unary_unary(ROUTE)(b"3", timeout=600) == b"member|3|"
        finally:
            await silent.stop(None)
        assert port.routes_answered == 3
        with pytest.raises(grpc.aio.AioRpcError) as e:           # other calls are still the leader's only
            await ch.unary_unary(ECHO)(b"x", timeout=60)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    run_with_member(check, forward_timeout_ms=300)
