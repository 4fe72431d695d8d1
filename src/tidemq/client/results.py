"""What a send answers: one SendResult per message, and SendResults, the answers of many
messages kept as the arrays a SendRecords response carries (codes, queue ids, queue offsets),
a SendResult made only when one is read.

A producer of many batches reads most answers only to see that they are all OK: ``all_ok()``
and ``failed()`` answer that from the arrays, without one object per message (building a
SendResult per message cost the client as much as the rest of a send).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Iterator, Sequence

from ..protocol.stubs import Code


@dataclass
class SendResult:
    """One message's answer. ``duplicate``: the broker recognised a resend of a message it had
    stored (same message id, within its dedup window) and stored nothing: ``offset`` is the
    first store's (``code`` OK, ``queue_id`` -1). ``error`` is text for people."""
    message_id: str
    offset: int
    code: int
    error: str = ""
    queue_id: int = -1          # SendRecords answers it; SendMessage does not (-1)
    duplicate: bool = False

    @property
    def ok(self) -> bool:
        return self.code == Code.OK


class _Chunk:
    """The answers to one request: message ids (bytes), codes, queue ids, offsets (arrays), the
    texts of the entries that have one, the indexes answered as duplicates, the response's text."""

    __slots__ = ("ids", "codes", "qids", "offsets", "texts", "dups", "top")

    def __init__(self, ids: Sequence[bytes], codes, qids, offsets, texts: dict, dups: frozenset, top: str) -> None:
        self.ids, self.codes, self.qids, self.offsets = ids, codes, qids, offsets
        self.texts, self.dups, self.top = texts, dups, top

    def one(self, i: int) -> SendResult:
        code = int(self.codes[i])
        text = self.texts.get(str(i), "") if self.texts else ""
        if code != Code.OK and not text:
            text = self.top
        return SendResult(self.ids[i].decode(), int(self.offsets[i]), code, text, int(self.qids[i]), i in self.dups)


class SendResults(Sequence):
    """The answers to the messages of one or more SendRecords requests, in order: a Sequence of
    SendResult built on demand. ``all_ok()``, ``failed()``, ``codes``, ``offsets`` and
    ``queue_ids`` read the arrays (array.array: the client loads no numpy)."""

    def __init__(self) -> None:
        self._chunks: list[_Chunk] = []
        self._starts: list[int] = []
        self._n = 0

    def add(self, ids: Sequence[bytes], codes, qids, offsets, texts: dict | None = None,
            dups: frozenset = frozenset(), top: str = "") -> None:
        """The answers to one request (``ids``: the messages' ids, the arrays one entry each)."""
        self._chunks.append(_Chunk(ids, codes, qids, offsets, texts or {}, dups, top))
        self._starts.append(self._n)
        self._n += len(codes)

    def extend(self, other: "SendResults") -> None:
        for c in other._chunks:
            self.add(c.ids, c.codes, c.qids, c.offsets, c.texts, c.dups, c.top)

    def __len__(self) -> int:
        return self._n

    def _locate(self, i: int) -> tuple[_Chunk, int]:
        n = self._n
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("SendResults index out of range")
        lo, hi = 0, len(self._starts) - 1
        while lo < hi:                      # the last chunk starting at or before i
            mid = (lo + hi + 1) // 2
            if self._starts[mid] <= i:
                lo = mid
            else:
                hi = mid - 1
        return self._chunks[lo], i - self._starts[lo]

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._n))]
        chunk, j = self._locate(i)
        return chunk.one(j)

    def __iter__(self) -> Iterator[SendResult]:
        for c in self._chunks:
            for j in range(len(c.codes)):
                yield c.one(j)

    def __eq__(self, other) -> bool:
        if isinstance(other, (list, tuple, SendResults)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None

    def __add__(self, other) -> list:
        return list(self) + list(other)

    def __repr__(self) -> str:
        return f"SendResults({len(self)} messages, {len(self.failed())} not OK)"

    def _concat(self, attr: str, typecode: str) -> array:
        out = array(typecode)
        for c in self._chunks:
            out.extend(getattr(c, attr))
        return out

    @property
    def codes(self) -> array:
        return self._concat("codes", "i")

    @property
    def offsets(self) -> array:
        return self._concat("offsets", "q")

    @property
    def queue_ids(self) -> array:
        return self._concat("qids", "i")

    def all_ok(self) -> bool:
        """Was every message answered OK (stored, or a duplicate of one stored)?"""
        return all(c.codes.count(Code.OK) == len(c.codes) for c in self._chunks)

    def failed(self) -> list[SendResult]:
        """The answers that are not OK, in order."""
        out = []
        for c in self._chunks:
            if c.codes.count(Code.OK) != len(c.codes):
                out += [c.one(j) for j, code in enumerate(c.codes) if code != Code.OK]
        return out
