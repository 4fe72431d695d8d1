"""Producer (batches through SendRecords, or SendMessage, several requests in flight),
PullConsumer (PullRecords / PullMessage by offset, QueryOffset, GetOffset / UpdateOffset) and
PopConsumer (ReceiveMessage / AckMessage: a group's messages, each acked once done).

Both sign every call when given an access key and secret key (the official clients'
MQv2-HMAC-SHA1 headers, protocol/signing.py) and speak TLS when ``tls`` is set or root
certificates are given. What is said on the wire is tidemq.protocol; this package imports
nothing of the broker or of the store engine (only the record codec, to decode raw pulls)."""

from __future__ import annotations

import os
import struct
import sys
import time
from array import array
from collections import deque
from dataclasses import dataclass, field
from itertools import chain
from typing import Iterable, Iterator, Mapping, Sequence

import grpc
from google.protobuf import duration_pb2, timestamp_pb2

from ..protocol import data, pull_frame, send_frame
from ..protocol.signing import date_time, signed_metadata
from ..protocol.stubs import Code, Encoding, MessageType, pb, sgrpc, spb
from ..record.codec import OFF_QUEUEOFFSET, decode_records
from .errors import ClientError
from .results import SendResults
from .send_stream import FrameStream, Unsupported
from .settings import tls_options
from .watchdog import Watchdog


@dataclass
class PullResult:
    code: int
    next_offset: int
    messages: list = field(default_factory=list)     # apache.rocketmq.v2.Message

    @property
    def found(self) -> bool:
        return self.code == Code.OK


@dataclass
class RecordsResult:
    """A raw pull: the records as stored, back to back (protocol/pull_frame.py)."""
    code: int
    message: str
    next_offset: int
    min_offset: int
    max_offset: int
    sizes: array          # i32 per record
    data: memoryview      # the records
    offset: int = -1      # the offset it was pulled from (iter_records: results follow on without gaps)
    # the frame's CRC held: the records are as the broker sent them, and it sends only records whose
    # own CRCs it checked. False: the broker sent no frame CRC (older): check each record's CRCs
    checked: bool = False

    @property
    def found(self) -> bool:
        return self.code == Code.OK

    def messages(self) -> list:
        """The records decoded one by one (StoredMessage); bulk readers decode ``data`` themselves."""
        return decode_records(self.data, self.sizes)


def _split(r: RecordsResult, max_count: int, max_bytes: int) -> Iterator[RecordsResult]:
    """A found result as results of at most ``max_count`` records and ``max_bytes`` bytes (one
    record at least), following on: each one's next offset is the queue offset of the record
    after it (the last one's, the answer's)."""
    sizes, data = r.sizes, r.data
    n = len(sizes)
    i, pos, at = 0, 0, r.offset
    while i < n:
        j, nbytes = i, 0
        while j < n and j - i < max_count and (j == i or nbytes + sizes[j] <= max_bytes):
            nbytes += sizes[j]
            j += 1
        nxt = r.next_offset if j == n else _QOFF.unpack_from(data, pos + nbytes + OFF_QUEUEOFFSET)[0]
        yield RecordsResult(r.code, r.message, nxt, r.min_offset, r.max_offset, sizes[i:j], data[pos:pos + nbytes],
                            at, r.checked)
        i, pos, at = j, pos + nbytes, nxt


_QOFF = struct.Struct(">q")
STREAM_RECORDS_PER_ANSWER = 1024   # iter_records on a stream: records per answer (several results of it)
STREAM_RESULTS_PER_ANSWER = 8      # ... at most this many results per answer
LOOKAHEAD_BYTES = 4 << 20      # HTTP/2 flow-control lookahead of the client's streams
MESSAGE_MAX_BYTES = 256 << 20  # the largest request / response the client's channel carries
PREFETCH_MAX = 8               # iter_records: pulls under way at most while the caller works


class _Channel:
    """A lazily created channel, recreated after a fork (gRPC channels do not survive one).

    ``access_key`` / ``secret_key``: every call carries the signature headers (``metadata``).
    ``tls`` (True, or settings.TlsOptions: a CA, this client's own certificate, the server name) or
    ``root_certificates`` (a PEM file's path, or its bytes; None: the system's roots): a TLS channel."""

    def __init__(self, endpoint: str, timeout_s: float, access_key: str | None = None, secret_key: str | None = None,
                 tls: bool = False, root_certificates: str | bytes | None = None,
                 message_max_bytes: int = MESSAGE_MAX_BYTES, lookahead_bytes: int = LOOKAHEAD_BYTES) -> None:
        if (access_key is None) != (secret_key is None):
            raise ValueError("give both access_key and secret_key, or neither")
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.message_max_bytes = message_max_bytes
        self.lookahead_bytes = lookahead_bytes
        self._keys = (access_key, secret_key) if access_key is not None else None
        self._signed: tuple[int, list] | None = None       # (second, headers): signed once a second
        self._tls = tls_options(tls, root_certificates)
        self._pid = None
        self._channel = None
        self._stub = None
        self._unary: dict = {}

    def metadata(self) -> list | None:
        """The signature headers for a call now (None without keys)."""
        if self._keys is None:
            return None
        now = int(time.time())
        signed = self._signed
        if signed is None or signed[0] != now:
            signed = self._signed = (now, signed_metadata(self._keys[0], self._keys[1], date_time(now)))
        return signed[1]

    @property
    def stub(self):
        if self._pid != os.getpid():
            # a large lookahead: a raw pull's response arrives without waiting for window updates
            options = [("grpc.max_receive_message_length", self.message_max_bytes),
                       ("grpc.max_send_message_length", self.message_max_bytes),
                       ("grpc.http2.lookahead_bytes", self.lookahead_bytes)]
            if self._tls is not None:
                self._channel = grpc.secure_channel(self.endpoint, self._tls.credentials(),
                                                    options=options + self._tls.channel_options())
            else:
                self._channel = grpc.insecure_channel(self.endpoint, options=options)
            self._stub = sgrpc.MessagingServiceStub(self._channel)
            self._unary = {}
            self._pid = os.getpid()
        return self._stub

    def stream(self, method: str):
        """A raw-bytes stream-stream callable on this channel."""
        _ = self.stub                               # (re)creates the channel after a fork
        return self._channel.stream_stream(method)

    def unary_stream(self, method: str):
        """A raw-bytes unary-stream callable on this channel."""
        _ = self.stub
        return self._channel.unary_stream(method)

    def unary(self, method: str):
        """A raw-bytes unary callable on this channel (cached per method)."""
        _ = self.stub                               # (re)creates the channel after a fork
        fn = self._unary.get(method)
        if fn is None:
            fn = self._unary[method] = self._channel.unary_unary(method)
        return fn

    def close(self) -> None:
        if self._channel is not None and self._pid == os.getpid():
            self._channel.close()
        self._channel = self._stub = None
        self._pid = None


def _raw_call(fn, request: bytes, **kw):
    """A call of a tidemq.Data method: a refused signature (gRPC UNAUTHENTICATED, as the broker
    answers outside MessagingService) raises ClientError(UNAUTHORIZED) like the protocol's RPCs."""
    try:
        return fn(request, **kw)
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.UNAUTHENTICATED:
            raise ClientError(Code.UNAUTHORIZED, e.details()) from None
        raise


def _result(future):
    try:
        return future.result()
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.UNAUTHENTICATED:
            raise ClientError(Code.UNAUTHORIZED, e.details()) from None
        raise


def _message_ids(n: int) -> list[bytes]:
    """``n`` new message ids: "01" + 32 upper-case hex digits of randomness (one urandom call)."""
    h = os.urandom(16 * n).hex().upper().encode()
    return [b"01" + h[j:j + 32] for j in range(0, 32 * n, 32)]


def _text(x: str | None) -> bytes:
    return x.encode("utf-8") if x else b""


def _keys(ks: Sequence[str] | None) -> bytes:
    if not ks:
        return b""
    for k in ks:
        if " " in k:
            raise ValueError(f"key {k!r}: keys cannot contain spaces")
    return " ".join(k for k in ks if k).encode("utf-8")


def _properties(p: Mapping[str, str] | None) -> bytes:
    return "".join(f"{k}\x01{v}\x02" for k, v in p.items()).encode("utf-8") if p else b""


class _Owner:
    """Owns a _Channel: ``close()`` it, or use the object in a ``with``."""

    _ch: _Channel

    def close(self) -> None:
        self._ch.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Producer(_Owner):
    """Batches of messages of one topic. By default through ``/tidemq.Data/SendRecords``
    (one compact frame per batch, stored with one put_batch; NORMAL messages); with
    ``raw=False`` through the protocol's SendMessage (one protobuf Message each), e.g. for
    protocol-compatibility tests. Both answer one SendResult per message, as a SendResults
    (results.py: the arrays of the answers, a SendResult made when one is read).

    ``access_key`` / ``secret_key``: sign every call; ``tls`` / ``root_certificates`` (a PEM
    file or its bytes): a TLS channel (see _Channel)."""

    def __init__(self, endpoint: str, timeout_s: float = 10.0, max_in_flight: int = 4, *, raw: bool = True,
                 access_key: str | None = None, secret_key: str | None = None, tls: bool = False,
                 root_certificates: str | bytes | None = None, stream: bool = True) -> None:
        self._ch = _Channel(endpoint, timeout_s, access_key, secret_key, tls, root_certificates)
        self._routed = _Routed(self._ch, timeout_s, (access_key, secret_key), tls, root_certificates)
        self.max_in_flight = max_in_flight
        self.raw = raw
        self.stream = stream            # send_batches on one SendRecordsStream call (False: a call per batch)

    def close(self) -> None:
        self._routed.close()
        self._ch.close()
    # SendMessage ------------------------------------------------------------------------------
    def _request(self, topic: str, bodies: Sequence[bytes], tags: str | Sequence[str | None] | None,
                 keys: Sequence[Sequence[str]] | None, properties: Sequence[Mapping[str, str]] | None,
                 message_ids: Sequence[str] | None):
        res = pb.Resource(name=topic)
        msgs = []
        ids = message_ids or [m.decode() for m in _message_ids(len(bodies))]
        for i, body in enumerate(bodies):
            sp = pb.SystemProperties(message_id=ids[i], body_encoding=Encoding.IDENTITY,
                                     message_type=MessageType.NORMAL)
            t = tags if tags is None or isinstance(tags, str) else tags[i]
            if t:
                sp.tag = t
            if keys and keys[i]:
                sp.keys.extend(keys[i])
            msgs.append(pb.Message(topic=res, body=body, system_properties=sp,
                                   user_properties=properties[i] if properties else None))
        return spb.SendMessageRequest(messages=msgs)

    @staticmethod
    def _results(resp, call) -> SendResults:
        """``call``: the finished call, whose trailing metadata names the duplicates (protocol/data.py)."""
        if not resp.entries:
            raise ClientError(resp.status.code, resp.status.message)
        dups = frozenset(data.duplicates_of(call.trailing_metadata()))
        es = resp.entries
        out = SendResults()
        out.add([e.message_id.encode() for e in es], array("i", [e.status.code for e in es]),
                array("i", [-1]) * len(es), array("q", [e.offset for e in es]),
                {str(i): e.status.message for i, e in enumerate(es) if e.status.message}, dups)
        return out

    # SendRecords -------------------------------------------------------------------------------
    def _frame(self, topic: str, bodies: Sequence[bytes], tags, keys, properties,
               message_ids: Sequence[str] | None) -> tuple[bytes, list[bytes]]:
        n = len(bodies)
        ids = [m.encode("utf-8") for m in message_ids] if message_ids else _message_ids(n)
        tg = None
        if isinstance(tags, str):
            tg = [tags.encode("utf-8")] * n
        elif tags is not None:
            tg = [_text(t) for t in tags]
        ks = [_keys(k) for k in keys] if keys else None
        ps = [_properties(p) for p in properties] if properties else None
        return send_frame.encode_request(topic, bodies, ids, tg, ks, ps), ids

    @staticmethod
    def _record_results(raw: bytes, ids: list[bytes], into: SendResults | None = None) -> SendResults:
        """The answers of a SendRecords response, added to ``into`` (a new SendResults: None)."""
        head, codes, qids, offsets = send_frame.decode_response_columns(raw)
        if not len(codes):
            raise ClientError(head.get("code", Code.INTERNAL_SERVER_ERROR), head.get("message", ""))
        if len(codes) != len(ids):
            raise ClientError(Code.INTERNAL_SERVER_ERROR, f"{len(codes)} results for {len(ids)} messages")
        out = SendResults() if into is None else into
        out.add(ids, codes, qids, offsets, head.get("messages"), send_frame.duplicates(head), head.get("message", ""))
        return out

    def _send_records(self, ch: _Channel | None = None):
        return (ch or self._ch).unary(data.SEND_RECORDS_PATH)

    # the API -------------------------------------------------------------------------------------
    def send_batch(self, topic: str, bodies: Sequence[bytes], tags: str | Sequence[str | None] | None = None,
                   keys: Sequence[Sequence[str]] | None = None, properties: Sequence[Mapping[str, str]] | None = None,
                   message_ids: Sequence[str] | None = None) -> SendResults:
        """One request with every body; one result per message. ``tags``: one for all or one
        per message. ``message_ids`` lets a retry reuse the ids of a failed attempt (they are
        the messages' unique keys: the broker answers a resent id from its dedup window)."""
        ch = self._routed.for_send(topic)     # a topic spread over several broker groups: each in turn
        if not self.raw:
            req = self._request(topic, bodies, tags, keys, properties, message_ids)
            return self._results(*ch.stub.SendMessage.with_call(req, timeout=ch.timeout_s, metadata=ch.metadata()))
        frame, ids = self._frame(topic, bodies, tags, keys, properties, message_ids)
        return self._record_results(_raw_call(self._send_records(ch), frame, timeout=ch.timeout_s,
                                              metadata=ch.metadata()), ids)

    def send_batches(self, topic: str, batches: Iterable[Sequence[bytes]], tags: str | None = None) -> SendResults:
        """Send many batches with up to max_in_flight requests under way; results in order."""
        pending: deque = deque()
        out = SendResults()
        timeout = self._ch.timeout_s
        if not self.raw:
            stub = self._ch.stub
            for bodies in batches:
                pending.append(stub.SendMessage.future(self._request(topic, bodies, tags, None, None, None),
                                                       timeout=timeout, metadata=self._ch.metadata()))
                if len(pending) >= self.max_in_flight:
                    f = pending.popleft()
                    out.extend(self._results(f.result(), f))
            while pending:
                f = pending.popleft()
                out.extend(self._results(f.result(), f))
            return out
        frames = (self._frame(topic, bodies, tags, None, None, None) for bodies in batches)
        one = self._routed.single(topic)
        if one is not None and self.stream:          # one broker group: the batches on one stream
            try:
                FrameStream(one, self.max_in_flight, timeout).run(frames, lambda raw, ids: self._record_results(
                    raw, ids, out))
                return out
            except Unsupported as e:                 # an older broker: the unary calls, from the first
                frames = chain(e.sent, frames)
        for frame, ids in frames:
            ch = self._routed.for_send(topic)
            pending.append((self._send_records(ch).future(frame, timeout=timeout, metadata=ch.metadata()), ids))
            if len(pending) >= self.max_in_flight:
                f, ids = pending.popleft()
                self._record_results(_result(f), ids, out)
        while pending:
            f, ids = pending.popleft()
            self._record_results(_result(f), ids, out)
        return out

    def queue_count(self, topic: str) -> int:
        return _route(self._ch, topic)

    def members(self, topic: str, queue_id: int) -> list[str]:
        """The endpoints of the members of the broker group that holds this queue (_members)."""
        return _members(self._routed, self._ch.endpoint, topic, queue_id)


def _route(ch: _Channel, topic: str) -> int:
    return len(_queue_targets(ch, topic))


def _target(endpoints) -> str:
    """A gRPC target for an Endpoints message: 'h:p', or 'ipv4:h1:p1,h2:p2' (pick_first over them)."""
    addrs = [f"{a.host}:{a.port}" for a in endpoints.addresses]
    return addrs[0] if len(addrs) == 1 else "ipv4:" + ",".join(addrs)


def _queue_targets(ch: _Channel, topic: str) -> dict[int, tuple[str, list[str]]]:
    """Per queue id: (the target of its group's writes, its followers' endpoints), from QueryRoute. A
    broker group lists a queue once as its master (broker id 0) and once per follower (read only);
    a topic spread over several groups names each queue's group."""
    r = ch.stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name=topic)), timeout=ch.timeout_s,
                           metadata=ch.metadata())
    if r.status.code != Code.OK:
        raise ClientError(r.status.code, r.status.message)
    out: dict[int, tuple[str, list[str]]] = {}
    for q in r.message_queues:
        master, followers = out.get(q.id, ("", []))
        if q.broker.id == 0:
            master = _target(q.broker.endpoints)
        else:
            followers = followers + [_target(q.broker.endpoints)]
        out[q.id] = (master, followers)
    return out


class _Routed:
    """The channels of a client of a cluster: the one it was given, and, for a queue whose group it
    was not given (a topic spread over several broker groups), that group's."""

    def __init__(self, ch: _Channel, timeout_s: float, keys: tuple, tls: bool, roots) -> None:
        self.ch = ch
        self._make = lambda target: _Channel(target, timeout_s, *keys, tls=tls, root_certificates=roots)
        self._routes: dict[str, dict[int, tuple[str, list[str]]]] = {}
        self._failed_until: dict[str, float] = {}
        self._channels: dict[str, _Channel] = {}
        self._rr = 0

    ROUTE_RETRY_S = 5.0        # a route that could not be asked for: the given channel until then

    def targets(self, topic: str) -> dict[int, tuple[str, list[str]]]:
        """Per queue (master target, follower endpoints); {} while the route cannot be had (the
        given channel is used: a topic not created yet, a broker not reachable now)."""
        t = self._routes.get(topic)
        if t is None or (not t and time.monotonic() >= self._failed_until.get(topic, 0.0)):
            try:
                t = _queue_targets(self.ch, topic)
            except (ClientError, grpc.RpcError):
                t = {}
                self._failed_until[topic] = time.monotonic() + self.ROUTE_RETRY_S
            self._routes[topic] = t
        return t

    def channel(self, target: str) -> _Channel:
        if target == self.ch.endpoint:
            return self.ch
        c = self._channels.get(target)
        if c is None:
            c = self._channels[target] = self._make(target)
        return c

    def _mine(self, master: str, followers: list[str]) -> bool:
        ep = self.ch.endpoint
        return ep == master or ep in followers or ep in master.removeprefix("ipv4:").split(",")

    def for_queue(self, topic: str, queue_id: int) -> _Channel:
        master, followers = self.targets(topic).get(queue_id, ("", []))
        if not master or self._mine(master, followers):
            return self.ch
        return self.channel(master)

    def followers(self, topic: str, queue_id: int) -> list[_Channel]:
        return [self.channel(f) for f in self.targets(topic).get(queue_id, ("", []))[1] if f != self.ch.endpoint]

    def single(self, topic: str) -> _Channel | None:
        """The one channel every send of ``topic`` goes to, or None (a topic spread over groups)."""
        masters = {m for m, _f in self.targets(topic).values() if m}
        return self.ch if len(masters) <= 1 else None

    def for_send(self, topic: str) -> _Channel:
        """The given channel, or (a topic spread over several groups) each group's in turn."""
        masters = sorted({m for m, _f in self.targets(topic).values() if m})
        if len(masters) <= 1:
            return self.ch
        self._rr += 1
        return self.channel(masters[self._rr % len(masters)])

    def close(self) -> None:
        for c in self._channels.values():
            c.close()
        self._channels = {}


class PullConsumer(_Owner):
    """Reads by offset: ``pull_records`` (records as stored, decoded here) or ``pull``
    (PullMessage); offsets. Keys and TLS as for Producer."""

    def __init__(self, endpoint: str, group: str = "", timeout_s: float = 10.0, *, access_key: str | None = None,
                 secret_key: str | None = None, tls: bool = False,
                 root_certificates: str | bytes | None = None, prefetch_max: int = PREFETCH_MAX,
                 stream: bool = True) -> None:
        self._ch = _Channel(endpoint, timeout_s, access_key, secret_key, tls, root_certificates)
        self._routed = _Routed(self._ch, timeout_s, (access_key, secret_key), tls, root_certificates)
        self.group = group
        self.prefetch_max = prefetch_max
        self.stream = stream            # iter_records with prefetch on one PullRecordsStream call

    def close(self) -> None:
        self._routed.close()
        self._ch.close()

    def _for(self, topic: str, queue_id: int) -> _Channel:
        """The channel of the broker group that holds this queue (the one given, unless the topic is
        spread over several groups)."""
        return self._routed.for_queue(topic, queue_id)
    @staticmethod
    def _mq(topic: str, queue_id: int):
        return pb.MessageQueue(topic=pb.Resource(name=topic), id=queue_id)

    def queue_count(self, topic: str) -> int:
        return _route(self._ch, topic)

    def members(self, topic: str, queue_id: int) -> list[str]:
        """The endpoints of the members of the broker group that holds this queue (_members)."""
        return _members(self._routed, self._ch.endpoint, topic, queue_id)

    def pull(self, topic: str, queue_id: int, offset: int, batch_size: int = 32, tags: str = "*",
             long_polling_s: float = 0.0) -> PullResult:
        req = spb.PullMessageRequest(group=pb.Resource(name=self.group), message_queue=self._mq(topic, queue_id),
                                     offset=offset, batch_size=batch_size,
                                     filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression=tags),
                                     long_polling_timeout=duration_pb2.Duration(seconds=int(long_polling_s),
                                                                                nanos=int(long_polling_s % 1 * 1e9)))
        res = PullResult(Code.CODE_UNSPECIFIED, offset)
        ch = self._for(topic, queue_id)
        for r in ch.stub.PullMessage(req, timeout=ch.timeout_s + long_polling_s, metadata=ch.metadata()):
            kind = r.WhichOneof("content")
            if kind == "status":
                res.code = r.status.code
                if r.status.code not in (Code.OK, Code.MESSAGE_NOT_FOUND, Code.ILLEGAL_OFFSET):
                    raise ClientError(r.status.code, r.status.message)
            elif kind == "message":
                res.messages.append(r.message)
            elif kind == "next_offset":
                res.next_offset = r.next_offset
        return res

    def _records_request(self, topic: str, queue_id: int, offset: int, max_count: int, max_bytes: int,
                         wait_s: float) -> bytes:
        return pull_frame.encode_request(topic, queue_id, offset, max_count, max_bytes, int(wait_s * 1000))

    @staticmethod
    def _records_result(raw: bytes, offset: int) -> RecordsResult:
        head, sizes_raw, records = pull_frame.decode_response(raw)
        code = head.get("code", Code.INTERNAL_SERVER_ERROR)
        if code not in (Code.OK, Code.MESSAGE_NOT_FOUND, Code.ILLEGAL_OFFSET):
            raise ClientError(code, head.get("message", ""))
        sent_crc = head.get("crc32")
        if sent_crc is not None and pull_frame.frame_crc(sizes_raw, records) != sent_crc:
            raise ClientError(Code.MESSAGE_CORRUPTED, f"a PullRecords response from offset {offset} fails its "
                                                      "frame CRC: damaged on the way (pull again)")
        sizes = array("i")
        sizes.frombytes(sizes_raw)
        if sys.byteorder != "little":
            sizes.byteswap()
        return RecordsResult(code, head.get("message", ""), head.get("next_offset", offset),
                             head.get("min_offset", 0), head.get("max_offset", 0), sizes, records, offset,
                             sent_crc is not None)

    def pull_records(self, topic: str, queue_id: int, offset: int, max_count: int = 4096, max_bytes: int = 16 << 20,
                     wait_s: float = 0.0) -> RecordsResult:
        """Up to max_count records from ``offset`` in one response, as stored (no per-message
        protobuf): the fast path for bulk readers. Raises ClientError for an unknown queue or a
        bad request; an offset outside the queue answers ILLEGAL_OFFSET with its bounds."""
        req = self._records_request(topic, queue_id, offset, max_count, max_bytes, wait_s)
        ch = self._for(topic, queue_id)
        try:
            raw = _raw_call(ch.unary(data.PULL_RECORDS_PATH), req, timeout=ch.timeout_s + wait_s,
                            metadata=ch.metadata())
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            for f in self._routed.followers(topic, queue_id):     # the leader is down: read from a follower
                try:
                    raw = _raw_call(f.unary(data.PULL_RECORDS_PATH), req, timeout=f.timeout_s + wait_s,
                                    metadata=f.metadata())
                    break
                except grpc.RpcError:
                    continue
            else:
                raise
        return self._records_result(raw, offset)

    def iter_records(self, topic: str, queue_id: int, start: int, end: int | None = None, max_count: int = 4096,
                     max_bytes: int = 16 << 20, prefetch: int = 2, wait_s: float = 0.0) -> Iterator[RecordsResult]:
        """The raw pulls of [start, end) in order, with up to ``prefetch`` (0 .. prefetch_max)
        more pulls under way while the caller works on the result it was handed.

        The results follow on without gaps (each one's ``offset`` is the one before's
        ``next_offset``). A result without records (``found`` False) is a stretch of offsets
        that holds none: holes (MESSAGE_NOT_FOUND) or records cleaned away (ILLEGAL_OFFSET,
        next_offset = the queue's first offset); its ``next_offset`` is at most ``end``.

        It stops at ``end``; without ``end``, or when the queue ends first, at the queue's end
        as the last response saw it; with ``wait_s`` > 0 a pull at the queue's end instead waits
        up to ``wait_s`` for new records, and the iteration goes on until ``end`` (forever
        without one). An error (ClientError, grpc.RpcError) is raised where the iteration
        reaches the pull that failed; the pulls under way are cancelled when the iteration
        ends or is closed early.

        The next pulls are sent before their offset is known: the one after a pull from ``o``
        of ``n`` records is asked from ``o + n``. A response that stops short (the byte limit,
        a segment's end, the queue's end) makes the pulls after it useless: they are
        cancelled and asked again, and the later pulls ask for 3/4 of what that response
        held. Without ``end`` nothing is asked beyond the last known end of the queue."""
        if not 0 <= prefetch <= self.prefetch_max:
            raise ValueError(f"prefetch {prefetch} outside 0 .. {self.prefetch_max}")
        if max_count < 1:
            raise ValueError(f"max_count {max_count} must be >= 1")
        if prefetch > 0 and self.stream:
            return self._streamed_records(topic, queue_id, start, end, max_count, max_bytes, prefetch, wait_s)
        return self._iter_records(topic, queue_id, start, end, max_count, max_bytes, prefetch, wait_s)

    def _streamed_records(self, topic, queue_id, start, end, max_count, max_bytes, prefetch, wait_s):
        """iter_records on one PullRecordsStream call (the broker reads ahead of the caller as
        gRPC's flow control lets it, instead of ``prefetch`` calls); on the unary pulls when the
        broker does not serve it, or after a fork."""
        ch = self._for(topic, queue_id)
        k = max(1, min(STREAM_RESULTS_PER_ANSWER, STREAM_RECORDS_PER_ANSWER // max_count))    # results per answer
        req = pull_frame.encode_request(topic, queue_id, start, max_count * k, min(max_bytes * k, pull_frame.BYTES_MAX),
                                        int(wait_s * 1000), end)
        watch = Watchdog(ch.timeout_s + wait_s)
        pid = os.getpid()
        at = start
        call = None
        try:
            watch.call = call = ch.unary_stream(data.PULL_RECORDS_STREAM_PATH)(req, metadata=ch.metadata())
            it = iter(call)
            while end is None or at < end:
                watch.waiting()
                try:
                    raw = next(it)
                except StopIteration:
                    return                                   # the broker ended it: the queue's end
                finally:
                    watch.got()
                r = self._records_result(raw, at)
                nxt = r.next_offset
                if not r.found:
                    if nxt > at:                                     # holes, or cleaned away
                        if end is not None and nxt > end:
                            nxt = r.next_offset = end
                    elif r.code == Code.ILLEGAL_OFFSET and wait_s > 0:    # beyond the queue's end
                        raise ClientError(r.code, r.message)
                    elif wait_s <= 0:
                        return
                if r.found and k > 1:
                    for part in _split(r, max_count, max_bytes):
                        yield part
                else:
                    yield r
                at = nxt
                if pid != os.getpid():              # forked mid-way: the rest on this process's own calls
                    break
        except grpc.RpcError as e:
            if watch.fired:
                raise ClientError(Code.REQUEST_TIMEOUT, f"PullRecordsStream of {topic} queue {queue_id}: no answer "
                                                        f"within {ch.timeout_s + wait_s:g} s at offset {at}") from None
            if e.code() == grpc.StatusCode.UNAUTHENTICATED:
                raise ClientError(Code.UNAUTHORIZED, e.details()) from None
            if e.code() != grpc.StatusCode.UNIMPLEMENTED or at != start:
                raise
        finally:
            watch.stop()
            if call is not None and pid == os.getpid():
                call.cancel()
        if end is None or at < end:                   # an older broker, or a fork: the unary pulls
            yield from self._iter_records(topic, queue_id, at, end, max_count, max_bytes, prefetch, wait_s)

    def _iter_records(self, topic, queue_id, start, end, max_count, max_bytes, prefetch, wait_s):
        method = data.PULL_RECORDS_PATH
        ch = self._for(topic, queue_id)
        timeout = ch.timeout_s + wait_s
        pending: deque = deque()            # (offset, count asked, future), in offset order
        pid = os.getpid()
        at = start
        known_end: int | None = None        # the queue's end offset, as the last response saw it
        count = max_count

        def send(offset: int) -> None:
            n = count if end is None else min(count, end - offset)
            req = self._records_request(topic, queue_id, offset, n, max_bytes, wait_s)
            fut = ch.unary(method).future(req, timeout=timeout, metadata=ch.metadata())
            pending.append((offset, n, fut))

        def drop() -> None:
            if pid == os.getpid():          # a parent's futures are not touched after a fork
                for p in pending:
                    p[2].cancel()
            pending.clear()

        try:
            while end is None or at < end:
                if pid != os.getpid():      # forked: the channel is new here, ask again
                    drop()
                    pid = os.getpid()
                if not pending:
                    send(at)
                off, asked, fut = pending.popleft()
                r = self._records_result(_result(fut), off)
                known_end = r.max_offset
                nxt = r.next_offset
                if r.found:
                    if nxt - off < asked and nxt < known_end:      # short: fewer from now on
                        count = max(1, (nxt - off) * 3 // 4)
                elif nxt > off:                                    # holes, or cleaned away
                    if end is not None and nxt > end:
                        nxt = r.next_offset = end
                elif r.code == Code.ILLEGAL_OFFSET and wait_s > 0:    # beyond the queue's end
                    raise ClientError(r.code, r.message)
                elif wait_s > 0:                                   # at the end: poll again
                    drop()
                    continue
                else:
                    return
                at = nxt
                if pending and pending[0][0] != at:
                    drop()
                done = (end is not None and at >= end) or (wait_s <= 0 and at >= known_end)
                if not done:
                    limit = known_end if end is None else min(end, known_end)
                    following = pending[-1][0] + pending[-1][1] if pending else at
                    while len(pending) < prefetch and following < limit:
                        send(following)
                        following += pending[-1][1]
                yield r
                if done:
                    return
        finally:
            drop()

    def query_offset(self, topic: str, queue_id: int, policy: str = "END", timestamp_ms: int | None = None) -> int:
        req = spb.QueryOffsetRequest(message_queue=self._mq(topic, queue_id),
                                     query_offset_policy=pb.QueryOffsetPolicy.Value(policy))
        if timestamp_ms is not None:
            req.timestamp.CopyFrom(timestamp_pb2.Timestamp(seconds=timestamp_ms // 1000,
                                                           nanos=timestamp_ms % 1000 * 1_000_000))
        ch = self._for(topic, queue_id)
        r = ch.stub.QueryOffset(req, timeout=ch.timeout_s, metadata=ch.metadata())
        if r.status.code != Code.OK:
            raise ClientError(r.status.code, r.status.message)
        return r.offset

    def committed(self, topic: str, queue_id: int) -> int | None:
        ch = self._for(topic, queue_id)
        r = ch.stub.GetOffset(spb.GetOffsetRequest(group=pb.Resource(name=self.group),
                                                   message_queue=self._mq(topic, queue_id)),
                              timeout=ch.timeout_s, metadata=ch.metadata())
        if r.status.code == Code.OFFSET_NOT_FOUND:
            return None
        if r.status.code != Code.OK:
            raise ClientError(r.status.code, r.status.message)
        return r.offset

    def commit(self, topic: str, queue_id: int, offset: int) -> None:
        ch = self._for(topic, queue_id)
        r = ch.stub.UpdateOffset(spb.UpdateOffsetRequest(group=pb.Resource(name=self.group),
                                                         message_queue=self._mq(topic, queue_id), offset=offset),
                                 timeout=ch.timeout_s, metadata=ch.metadata())
        if r.status.code != Code.OK:
            raise ClientError(r.status.code, r.status.message)


class PopConsumer(_Owner):
    """A consumer group's messages the way the official simple consumer takes them: ``receive``
    pops messages from any queue of the topic (each invisible to the group for ``invisible_s``,
    then delivered again unless acked), ``ack`` says they are done. Keys and TLS as for Producer."""

    def __init__(self, endpoint: str, group: str, timeout_s: float = 10.0, *, access_key: str | None = None,
                 secret_key: str | None = None, tls: bool = False,
                 root_certificates: str | bytes | None = None) -> None:
        self._ch = _Channel(endpoint, timeout_s, access_key, secret_key, tls, root_certificates)
        self.group = group

    def receive(self, topic: str, batch_size: int = 32, invisible_s: float = 30.0, wait_s: float = 0.0,
                tags: str = "*") -> list:
        """Up to ``batch_size`` messages (apache.rocketmq.v2.Message, each with its receipt handle
        and delivery attempt); [] when there is none, after waiting up to ``wait_s`` for one."""
        req = spb.ReceiveMessageRequest(
            group=pb.Resource(name=self.group), message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=-1),
            filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression=tags), batch_size=batch_size,
            invisible_duration=duration_pb2.Duration(seconds=int(invisible_s), nanos=int(invisible_s % 1 * 1e9)),
            long_polling_timeout=duration_pb2.Duration(seconds=int(wait_s), nanos=int(wait_s % 1 * 1e9)))
        out = []
        for r in self._ch.stub.ReceiveMessage(req, timeout=self._ch.timeout_s + wait_s, metadata=self._ch.metadata()):
            kind = r.WhichOneof("content")
            if kind == "status" and r.status.code not in (Code.OK, Code.MESSAGE_NOT_FOUND):
                raise ClientError(r.status.code, r.status.message)
            if kind == "message":
                out.append(r.message)
        return out

    def ack(self, topic: str, messages: Sequence) -> list[int]:
        """Ack received messages; one status code per message (OK, or INVALID_RECEIPT_HANDLE for one
        whose invisible time ran out and was received again meanwhile)."""
        if not messages:
            return []
        entries = [spb.AckMessageEntry(message_id=m.system_properties.message_id,
                                       receipt_handle=m.system_properties.receipt_handle) for m in messages]
        r = self._ch.stub.AckMessage(spb.AckMessageRequest(group=pb.Resource(name=self.group),
                                                           topic=pb.Resource(name=topic), entries=entries),
                                     timeout=self._ch.timeout_s, metadata=self._ch.metadata())
        if not r.entries:
            raise ClientError(r.status.code, r.status.message)
        return [e.status.code for e in r.entries]


def _members(routed, endpoint: str, topic: str, queue_id: int) -> list[str]:
    """The endpoints of the members of the broker group that holds a queue, as the route lists
    them: its leader's first, then its followers' (which serve reads from their copies); the
    endpoint given when the route cannot be had."""
    master, followers = routed.targets(topic).get(queue_id, ("", []))
    if not master:
        return [endpoint]
    out: list[str] = []
    for ep in master.removeprefix("ipv4:").split(",") + list(followers):
        for e in ep.removeprefix("ipv4:").split(","):
            if e and e not in out:
                out.append(e)
    if routed._mine(master, followers) and endpoint not in out:
        out.append(endpoint)
    return out
