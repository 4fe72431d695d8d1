"""ReceiveMessage's ``attempt_id``: a client that lost a receive's answer (a timeout, a broken
stream) asks again with the same attempt id, and must get the messages that receive took, not new
ones (RocketMQ's pop with attemptId; the official push consumers send one and retry with it).

The broker remembers, per (group, topic, attempt id), the messages a receive handed out, until
their invisible time ends. A receive that repeats an attempt id answers those of them still in
flight under the same receipt handle (one acked, changed or redelivered since is left out), and
pops nothing new; once none is left, or the entry ended, the receive is an ordinary one. Entries
live in memory (ATTEMPTS_MAX, the oldest dropped first): after a restart a repeated attempt is an
ordinary receive, and what the lost answer held comes back after its invisible time (at least once).
"""

from __future__ import annotations

from collections import OrderedDict

from .pop_state import HandleError, PopState

ATTEMPTS_MAX = 10_000


class Attempts:
    def __init__(self, pop: PopState, entries_max: int = ATTEMPTS_MAX) -> None:
        self.pop = pop
        self.entries_max = entries_max
        self._seen: "OrderedDict[tuple[str, str, str], tuple[int, list]]" = OrderedDict()

    def remember(self, group: str, topic: str, attempt_id: str, messages: list, until_ms: int) -> None:
        if not attempt_id or not messages:
            return
        key = (group, topic, attempt_id)
        self._seen[key] = (until_ms, list(messages))
        self._seen.move_to_end(key)
        while len(self._seen) > self.entries_max:
            self._seen.popitem(last=False)

    def again(self, group: str, topic: str, attempt_id: str, now_ms: int) -> list | None:
        """The messages a receive with this attempt id took that are still in flight under their
        handle; None when there is no such receive (or nothing of it is left)."""
        if not attempt_id:
            return None
        key = (group, topic, attempt_id)
        got = self._seen.get(key)
        if got is None:
            return None
        until_ms, messages = got
        left = []
        if now_ms < until_ms:
            for m in messages:
                try:
                    if self.pop.current(group, m.system_properties.receipt_handle, topic)[3]:
                        left.append(m)
                except HandleError:
                    pass
        if not left:
            del self._seen[key]
            return None
        return left
