"""A send as every lane hands it to the send path (``SendBatch``), and what the path answers for
each of its messages (``Verdicts``).

The lanes parse their wire format and nothing else: SendMessage (send_message.py: a protobuf
request, or its common message read straight from its bytes) and SendRecords (send_records.py: a
frame of one topic). Each builds a SendBatch: the messages' topics and ids as columns, the body
bytes (flow control's measure), the refusals of the parse itself (what the wire format cannot
carry here: an unsupported message type, a frame's id out of bounds), and the messages in the form
the store takes them (a payload, one kind per store entry point):

* ``Messages``: store Messages (SendMessage's general path: MessageStore.put_batch), with each
  message's type, message group and delivery time, which the send path routes (FIFO queues,
  DELAY parking, TRANSACTION half messages);
* ``Encoded``: NORMAL messages of one topic with their record properties encoded already
  (SendMessage's common case, tidemq._accel.send_one: MessageStore.put_encoded);
* ``Slices``: messages of one topic as slices of one buffer (SendRecords' frame; SendMessage's batch
  of common messages read by tidemq._accel.send_many: MessageStore.put_slices).

The send path (send_path.py) answers ``Verdicts``: per message one ``Verdict`` (stored at a queue
offset, a duplicate of an earlier store, refused with a code and a reason, held by flow control
then refused) as columns, which the lane encodes back into its wire format.
"""

from __future__ import annotations

import enum
from typing import Callable, Sequence

from ...protocol.stubs import Code
from ...store import Message
from ..protection.access import IDENTITY
from ..sessions.telemetry import client_id_of


class Verdict(enum.IntEnum):
    OPEN = 0          # not decided yet (only inside the send path)
    STORED = 1        # stored: ``qids[i]``, ``offsets[i]``
    DUPLICATE = 2     # a resend of a message stored before: its first store's offset (answered OK)
    REFUSED = 3       # ``codes[i]`` and ``texts[i]``: not stored, or stored but not confirmed where its
                      # acknowledgement needs it (the FLUSH / SLAVE timeouts: a resend is never stored again)
    HELD = 4          # held by flow control until its deadline, then refused (TOO_MANY_REQUESTS)


# the verdicts as plain ints, for the hot paths (an IntEnum member costs a class-attribute look-up, and
# compared with a numpy scalar it takes numpy's slow path: ~9 us)
OPEN, STORED, DUPLICATE, REFUSED, HELD = (int(v) for v in Verdict)


class Caller:
    """Who sends: flow control's per-connection bounds (``peer``), the transaction checks' and the
    quotas' client (``client_id``), the deadline (``time_remaining()``: seconds left, None: none), the
    user the call was authenticated as (``user``: None with authentication off; protection/access.py).
    ``client_id`` is read from the call's metadata when first asked (``context``), not per call: the
    common send never asks."""

    __slots__ = ("peer", "_client_id", "time_remaining", "user", "_context")

    def __init__(self, peer: str, client_id: str | None, time_remaining: Callable[[], float | None],
                 user: str | None = None, context=None) -> None:
        self.peer = peer
        self._client_id = client_id
        self.time_remaining = time_remaining
        self.user = user
        self._context = context

    @property
    def client_id(self) -> str:
        if self._client_id is None:
            self._client_id = client_id_of(self._context) if self._context is not None else ""
        return self._client_id


def caller_of(context) -> Caller:
    """The Caller of an RPC (its grpc context, and the identity the guard found for it)."""
    who = IDENTITY.get()
    if who is None:
        return Caller(context.peer(), None, context.time_remaining, None, context)
    return Caller(who.peer, None, context.time_remaining, who.user, context)      # who.peer: a forwarded call's client


class Messages:
    """Store Messages (queue id None) with their routes: ``types`` the protocol's MessageType of each,
    ``groups`` its message group ("" none: FIFO picks a queue by it), ``delivery_ms`` its delivery
    time (None: now)."""

    __slots__ = ("messages", "types", "groups", "delivery_ms")

    def __init__(self, messages: list[Message], types: Sequence[int], groups: Sequence[str],
                 delivery_ms: Sequence[int | None]) -> None:
        self.messages, self.types, self.groups, self.delivery_ms = messages, types, groups, delivery_ms


class Encoded:
    """Messages of one topic with their record properties encoded: ``entries`` as MessageStore.put_encoded
    takes them ((body, properties) each), and their born time, born host ("ipv4:port") and sys flag."""

    __slots__ = ("entries", "born_ms", "born_host", "sys_flag")

    def __init__(self, entries, born_ms: int | None, born_host: str | None, sys_flag: int) -> None:
        self.entries, self.born_ms, self.born_host, self.sys_flag = entries, born_ms, born_host, sys_flag


class Slices:
    """Messages of one topic as slices of ``raw`` (MessageStore.put_slices: ``fields`` n x 10 uint32,
    ``extra`` properties every record gets, ``born`` every record's (born ms, born host, sys flag) or
    None: SendRecords' frames, SendMessage's batches read by tidemq._accel.send_many)."""

    __slots__ = ("raw", "fields", "extra", "born")

    def __init__(self, raw, fields, extra: bytes, born: tuple | None = None) -> None:
        self.raw, self.fields, self.extra, self.born = raw, fields, extra, born


class SendBatch:
    """What a lane parsed: ``n`` messages; ``topic`` when they share one (SendRecords, the common
    SendMessage), else ``topics`` one per message; ``id_of(i)`` message i's id ("" none); ``keys``
    the dedup window's keys (dedup.KEY_BYTES each, zero: no usable id), None for the path to compute
    from the ids; ``nbytes`` the body bytes; ``refused`` {i: (code, text)} of the parse; ``payload``
    one of Messages, Encoded, Slices."""

    __slots__ = ("n", "topic", "topics", "id_of", "keys", "nbytes", "refused", "payload")

    def __init__(self, n: int, payload, id_of: Callable[[int], str], nbytes: int, topic: str | None = None,
                 topics: list[str] | None = None, keys=None, refused: dict | None = None) -> None:
        assert (topic is None) != (topics is None), "one topic, or one per message"
        self.n, self.payload, self.id_of, self.nbytes = n, payload, id_of, nbytes
        self.topic, self.topics, self.keys = topic, topics, keys
        self.refused = refused or {}

    def topic_of(self, i: int) -> str:
        return self.topic if self.topic is not None else self.topics[i]


class Verdicts:
    """One verdict per message as columns (lists: a one-message request, the common one, pays no
    numpy call): ``kinds`` (Verdict), ``codes`` (the protocol's Code: OK for STORED and DUPLICATE),
    ``qids`` / ``offsets`` (the queue and queue offset a message was stored at; a duplicate's first
    offset, queue -1), ``texts`` {i: reason}, ``txns`` {i: the transaction id of a TRANSACTION
    message}, ``ids`` {i: the id the store gave a message sent without one}, ``recalls`` {i: the
    recall handle of a DELAY message waiting for its time (deferred/recall.py)}; ``whole`` (code, text)
    when one refusal was for the request as a whole (flow control, the topic), else None."""

    __slots__ = ("n", "kinds", "codes", "qids", "offsets", "texts", "txns", "ids", "whole", "decided", "recalls")

    def __init__(self, n: int) -> None:
        self.n = n
        self.kinds = [OPEN] * n
        self.codes = [Code.OK] * n
        self.qids = [-1] * n
        self.offsets = [-1] * n
        self.texts: dict[int, str] = {}
        self.txns: dict[int, str] = {}
        self.ids: dict[int, str] = {}
        self.recalls: dict[int, str] = {}     # {i: the recall handle of a DELAY message parked for later}
        self.whole: tuple[int, str] | None = None
        self.decided = 0              # messages with a verdict

    def refuse_all(self, code: int, text: str, kind: int = REFUSED) -> None:
        """One refusal for every message (the request's: flow control, its topic)."""
        n = self.n
        self.kinds = [kind] * n
        self.codes = [code] * n
        self.texts = dict.fromkeys(range(n), text)
        self.whole = (code, text)
        self.decided = n

    def refuse(self, i: int, code: int, text: str, kind: int = REFUSED) -> None:
        if self.kinds[i] == OPEN:
            self.decided += 1
        self.kinds[i] = kind
        self.codes[i] = code
        self.texts[i] = text

    def duplicate(self, i: int, offset: int, txn: str, text: str) -> None:
        if self.kinds[i] == OPEN:
            self.decided += 1
        self.kinds[i] = DUPLICATE
        self.offsets[i] = offset
        self.texts[i] = text
        if txn:
            self.txns[i] = txn

    def stored(self, i: int, qid: int, offset: int) -> None:
        if self.kinds[i] == OPEN:
            self.decided += 1
        self.kinds[i] = STORED
        self.qids[i] = qid
        self.offsets[i] = offset

    def all_stored(self, qids: list[int], offsets: list[int]) -> None:
        """Every message stored (a batch the store took whole)."""
        self.kinds = [STORED] * self.n
        self.qids, self.offsets = qids, offsets
        self.decided = self.n

    def any_open(self) -> bool:
        return self.decided < self.n

    def open(self) -> list[int]:
        """Indexes of the messages not decided yet."""
        if not self.decided:
            return list(range(self.n))
        return [i for i, k in enumerate(self.kinds) if k == OPEN]

    def duplicates(self) -> list[int]:
        if DUPLICATE not in self.kinds:
            return []
        return [i for i, k in enumerate(self.kinds) if k == DUPLICATE]

    def top(self) -> tuple[int, str]:
        """The answer's own status: a single message's, OK when every message is stored or a
        duplicate, else MULTIPLE_RESULTS."""
        if self.n == 1:
            return self.codes[0], self.texts.get(0, "")
        if self.codes.count(Code.OK) == self.n:
            return Code.OK, ""
        return Code.MULTIPLE_RESULTS, "some messages were not stored: see the entries"
