"""ReceiveMessage's ``attempt_id``: a client that lost a receive's answer (a timeout, a broken
stream) asks again with the same attempt id, and must get the messages that receive took, not new
ones (RocketMQ's pop with attemptId; the official push consumers send one and retry with it).

The broker remembers, per (group, topic, attempt id), the messages a receive handed out, until
their invisible time ends. A receive that repeats an attempt id answers those of them still in
flight under the same receipt handle (one acked, changed or redelivered since is left out), and
pops nothing new; once none is left, or the entry ended, the receive is an ordinary one. Entries
live in memory (at most ATTEMPTS_MAX of them holding at most ATTEMPT_BYTES_MAX of message bodies and
attempt ids: the oldest dropped first; an entry ends with its invisible time and is dropped then): after
a restart, or once dropped, a repeated attempt is an ordinary receive, and what the lost answer held comes
back after its invisible time (at least once). An attempt id is at most ATTEMPT_ID_CHARS_MAX characters
(the clients send a UUID): a longer one is refused by the receive (BAD_REQUEST).
"""

from __future__ import annotations

from collections import OrderedDict

from .pop_state import HandleError, PopState

ATTEMPTS_MAX = 10_000
ATTEMPT_BYTES_MAX = 64 << 20         # message bodies (and attempt ids) the entries hold at most
ATTEMPT_ID_CHARS_MAX = 128


def _size(attempt_id: str, messages: list) -> int:
    return len(attempt_id) + sum(len(m.body) for m in messages)


class Attempts:
    def __init__(self, pop: PopState, entries_max: int = ATTEMPTS_MAX, bytes_max: int = ATTEMPT_BYTES_MAX) -> None:
        self.pop = pop
        self.entries_max = entries_max
        self.bytes_max = bytes_max
        self.nbytes = 0                 # what the entries hold (_size)
        # (group, topic, attempt id) -> (until ms, the messages, their _size)
        self._seen: "OrderedDict[tuple[str, str, str], tuple[int, list, int]]" = OrderedDict()

    def _drop(self, key) -> None:
        self.nbytes -= self._seen.pop(key)[2]

    def remember(self, group: str, topic: str, attempt_id: str, messages: list, until_ms: int,
                 now_ms: int | None = None) -> None:
        """Keep what a receive with ``attempt_id`` took, until ``until_ms``; entries whose time is over
        at ``now_ms`` go first (from the oldest on), then the oldest while past the bounds."""
        if not attempt_id or not messages:
            return
        key = (group, topic, attempt_id)
        if key in self._seen:
            self._drop(key)
        size = _size(attempt_id, messages)
        if size > self.bytes_max:
            return
        while now_ms is not None and self._seen:          # the oldest first, while their time is over
            k, e = next(iter(self._seen.items()))
            if e[0] > now_ms:
                break
            self._drop(k)
        self._seen[key] = (until_ms, list(messages), size)
        self.nbytes += size
        while len(self._seen) > self.entries_max or self.nbytes > self.bytes_max:
            self._drop(next(iter(self._seen)))

    def again(self, group: str, topic: str, attempt_id: str, now_ms: int) -> list | None:
        """The messages a receive with this attempt id took that are still in flight under their
        handle; None when there is no such receive (or nothing of it is left)."""
        if not attempt_id:
            return None
        key = (group, topic, attempt_id)
        got = self._seen.get(key)
        if got is None:
            return None
        until_ms, messages, _ = got
        left = []
        if now_ms < until_ms:
            for m in messages:
                try:
                    if self.pop.current(group, m.system_properties.receipt_handle, topic)[3]:
                        left.append(m)
                except HandleError:
                    pass
        if not left:
            self._drop(key)
            return None
        return left
