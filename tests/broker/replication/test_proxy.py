"""broker/replication/proxy.py: the service a group member's gRPC server holds. Every RPC goes to the
broker's current service; while the broker does not lead, the RPCs that change broker state are
answered FORBIDDEN with the broker's refusal text and never reach the service, and reads go on.

The broker here is a stand-in holding only what the proxy reads (``service``, ``write_refusal``);
the service records what reached it and answers OK."""

import asyncio

import pytest

from tidemq.broker.replication.proxy import ServiceProxy
from tidemq.protocol.stubs import Code, sgrpc, spb, status

REFUSED = ["ReceiveMessage", "AckMessage", "ChangeInvisibleDuration", "ForwardMessageToDeadLetterQueue",
           "EndTransaction", "UpdateOffset"]
STREAMS = {"ReceiveMessage", "PullMessage", "Telemetry"}
RPCS = sorted(n for n in vars(sgrpc.MessagingServiceServicer) if not n.startswith("_"))


class Service:
    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        if name not in RPCS:
            raise AttributeError(name)
        if name in STREAMS:
            async def stream(request, context):
                self.calls.append(name)
                yield ("answer", name)
            return stream

        async def unary(request, context):
            self.calls.append(name)
            return ("answer", name)
        return unary


class Broker:
    def __init__(self, refusal=None):
        self.service = Service()
        self.refusal = refusal

    def write_refusal(self):
        return self.refusal


def call(proxy, name):
    fn = getattr(proxy, name)
    if name == "Telemetry":
        async def requests():
            yield None
        return asyncio.run(_collect(fn(requests(), None)))
    if name in STREAMS:
        return asyncio.run(_collect(fn(None, None)))
    return [asyncio.run(fn(None, None))]


async def _collect(gen):
    return [x async for x in gen]


def test_every_rpc_of_the_service_is_handed_on():
    """An RPC the proxy lacks would be answered UNIMPLEMENTED by the generated servicer."""
    assert [n for n in RPCS if getattr(ServiceProxy, n) is getattr(sgrpc.MessagingServiceServicer, n)] == []


@pytest.mark.parametrize("name", RPCS)
def test_a_leader_hands_every_rpc_to_its_current_service(name):
    b = Broker()
    proxy = ServiceProxy(b)
    assert call(proxy, name) == [("answer", name)] and b.service.calls == [name]
    b.service = Service()                       # a change of role replaces the service
    call(proxy, name)
    assert b.service.calls == [name]


@pytest.mark.parametrize("name", REFUSED)
def test_a_member_that_does_not_lead_refuses_what_changes_state(name):
    why = "this broker follows 127.0.0.1:8081 (group g): it takes no writes"
    b = Broker(refusal=why)
    answers = call(ServiceProxy(b), name)
    assert b.service.calls == [], "the service never saw it"
    assert len(answers) == 1 and answers[0].status == status(Code.FORBIDDEN, why)
    assert type(answers[0]).__name__ == f"{name}Response" and type(answers[0]) is getattr(spb, f"{name}Response")


@pytest.mark.parametrize("name", [n for n in RPCS if n not in REFUSED])
def test_a_member_that_does_not_lead_serves_the_rest(name):
    b = Broker(refusal="fenced")
    assert call(ServiceProxy(b), name) == [("answer", name)] and b.service.calls == [name]

