"""Telemetry streams: settings answered, and commands the broker starts (orphan checks).

Each open stream is a :class:`Session`, keyed by the ``x-mq-client-id`` metadata
seen when it opened (not by its first settings command: a Python client whose
stream was rebuilt after a broker restart sends no settings for up to 300 s,
docs/broker-protocol.md P10). What a client declared in earlier settings (its
type and topics) is remembered by client id for the broker's lifetime, so a
settings-less stream of a known producer is still usable.

A command for a client is queued on its session (bounded by ``outbox_max``: a stream
that does not drain gets no more) and written by the stream's own handler.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import AsyncIterator, Callable

from ...protocol.stubs import Code, pb, spb, status
from ..protection.access import IDENTITY, Identity

log = logging.getLogger("tidemq.broker")

OUTBOX_MAX = 1024           # commands queued for one stream at most
KNOWN_CLIENTS_MAX = 10_000  # client ids whose settings are remembered at most
PUBLISHING_TOPICS_MAX = 256 # topics one producer's settings may declare (more: BAD_REQUEST, nothing learned)


@dataclass
class Known:
    producer: bool = False
    topics: frozenset[str] = frozenset()


@dataclass
class Session:
    client_id: str
    outbox: asyncio.Queue = field(default_factory=lambda: asyncio.Queue(OUTBOX_MAX))
    who: Identity | None = None          # the user who opened it (None: authentication off)


class Sessions:
    def __init__(self, on_open: Callable[[str], None] = lambda cid: None,
                 on_close: Callable[[str], None] = lambda cid: None, outbox_max: int = OUTBOX_MAX,
                 known_clients_max: int = KNOWN_CLIENTS_MAX) -> None:
        """``on_open`` / ``on_close``: told the client id of each stream that opens / ends (clients.py)."""
        self.open: dict[str, list[Session]] = {}
        self.known: dict[str, Known] = {}
        self.on_open = on_open
        self.on_close = on_close
        self.outbox_max = outbox_max
        self.known_clients_max = known_clients_max
        # (who, topic) -> whether that user may pub the topic now (authentication on: the service's);
        # what a stream declared was vetted when declared, a revoke since must stop its orphan checks
        self.may_pub: Callable[[Identity, str], bool] | None = None

    def _learn(self, client_id: str, s: "pb.Settings") -> None:
        if s.client_type == pb.ClientType.PRODUCER or s.HasField("publishing"):
            k = Known(True, frozenset(t.name for t in s.publishing.topics))
        else:
            k = Known(False)
        self.known.pop(client_id, None)
        self.known[client_id] = k
        while len(self.known) > self.known_clients_max:
            self.known.pop(next(iter(self.known)))

    def producer_for(self, topic: str, client_id: str = "") -> Session | None:
        """A live stream of the client ``client_id`` (the sender), else of a producer that
        declared ``topic``; None when no such stream is open."""
        may = self.may_pub
        if client_id and self.open.get(client_id):
            s = self.open[client_id][-1]
            if may is None or s.who is None or may(s.who, topic):
                return s
        for cid, sessions in self.open.items():
            k = self.known.get(cid)
            if sessions and k is not None and k.producer and topic in k.topics:
                s = sessions[-1]
                if may is None or s.who is None or may(s.who, topic):
                    return s
        return None

    def send(self, session: Session, cmd: "spb.TelemetryCommand") -> bool:
        try:
            session.outbox.put_nowait(cmd)
            return True
        except asyncio.QueueFull:
            return False

    async def serve(self, client_id: str, request_iterator, closing: asyncio.Event,
                    reply: Callable[["pb.Settings"], "pb.Settings"],
                    vet: Callable[["pb.Settings"], tuple] | None = None) -> AsyncIterator:
        """The stream: answer every settings command with OK and ``reply(settings)``, write
        queued commands; until the client ends it or ``closing`` is set. ``vet(settings)``
        (authentication on: protection/access.py vet_settings): (None, the settings as its user may
        declare them: learned and replied to) or (the FORBIDDEN text, None: answered with it,
        nothing learned)."""
        session = Session(client_id, asyncio.Queue(self.outbox_max), IDENTITY.get())
        self.open.setdefault(client_id, []).append(session)
        self.on_open(client_id)
        it = request_iterator.__aiter__()
        nxt = asyncio.ensure_future(it.__anext__())
        out = asyncio.ensure_future(session.outbox.get())
        stop = asyncio.ensure_future(closing.wait())
        try:
            while True:
                done, _ = await asyncio.wait({nxt, out, stop}, return_when=asyncio.FIRST_COMPLETED)
                if stop in done:                     # the broker is stopping
                    return
                if out in done:
                    yield out.result()
                    out = asyncio.ensure_future(session.outbox.get())
                if nxt in done:
                    try:
                        cmd = nxt.result()
                    except StopAsyncIteration:       # the client ended the stream
                        return
                    nxt = asyncio.ensure_future(it.__anext__())
                    if cmd.HasField("settings"):
                        n = len(cmd.settings.publishing.topics)
                        if n > PUBLISHING_TOPICS_MAX:        # each is remembered (known): bounded
                            yield spb.TelemetryCommand(status=status(Code.BAD_REQUEST, (
                                f"{n} publishing topics: a producer's settings declare at most "
                                f"{PUBLISHING_TOPICS_MAX}")))
                            continue
                        why, settings = (None, cmd.settings) if vet is None else vet(cmd.settings)
                        if why is not None:
                            yield spb.TelemetryCommand(status=status(Code.FORBIDDEN, why))
                            continue
                        self._learn(client_id, settings)
                        yield spb.TelemetryCommand(status=status(Code.OK), settings=reply(settings))
                    # thread stack traces, verification results: nothing to say
        finally:
            lst = self.open.get(client_id, [])
            if session in lst:
                lst.remove(session)
            if not lst:
                self.open.pop(client_id, None)
            self.on_close(client_id)
            # the broker stopping, or the client cancelling the call: pending reads are dropped
            # and their outcome collected (no "Task exception was never retrieved")
            for f in (nxt, out, stop):
                if not f.done():
                    f.cancel()
                f.add_done_callback(lambda f: f.cancelled() or f.exception())


def client_header_of(context) -> str:
    """The call's ``x-mq-client-id`` as the client sent it ("" none)."""
    for k, v in context.invocation_metadata() or ():
        if k == "x-mq-client-id":
            return v
    return ""


def client_id_of(context) -> str:
    """The client a call comes from: its ``x-mq-client-id``, and with authentication on the user
    who signed the call in front of it (``user<TAB>id``: a metadata value never holds a tab). So a
    user naming another user's client id (they are predictable: host, pid, time) reaches a client
    of its own, never the other's sessions, renewals, lite subscriptions or termination."""
    cid = client_header_of(context)
    who = IDENTITY.get()
    return f"{who.user}\t{cid}" if who is not None and cid else cid
