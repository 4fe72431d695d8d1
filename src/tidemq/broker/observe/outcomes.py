"""Messages counted by topic and outcome since the broker started: what the send path answered
each message (``tidemq_messages_put_total{topic,status}``) and what the read paths handed out
(``tidemq_messages_got_total{topic,status}``). Counted where the answer is made, one dict update
per request and outcome (never per message on the batch paths).

    put status   the protocol code each message was answered with: OK (stored), TOO_MANY_REQUESTS
                 (held then refused by flow control, or refused by the store: disk full, archive
                 pending), MESSAGE_BODY_TOO_LARGE, BAD_REQUEST, ...; DUPLICATE: a resend answered
                 from the dedup window, stored once
    got status   OK: handed to a consumer (PullMessage, PullRecords, a first ReceiveMessage);
                 REDELIVERED: received again once its invisible time ran out; DEAD_LETTERED: moved
                 to %DLQ%<group> after delivery_attempts_max deliveries instead of delivered

A topic that does not exist is counted as topic "" (what a client may name is unbounded; the
metric's series must not be).
"""

from __future__ import annotations

from ...protocol.stubs import Code, code_name

DUPLICATE = "DUPLICATE"
OK, REDELIVERED, DEAD_LETTERED = "OK", "REDELIVERED", "DEAD_LETTERED"
_OK_CODE = Code.OK               # (the common outcome: its name without a lookup)


class Outcomes:
    __slots__ = ("counts", "_known")

    def __init__(self, known=None) -> None:
        self.counts: dict[tuple[str, str], int] = {}
        self._known = known            # topic -> queue count (0: no such topic); None: every topic counts

    def add(self, topic: str, status: str, n: int = 1) -> None:
        if n <= 0:
            return
        if self._known is not None and topic and not self._known(topic):
            topic = ""
        key = (topic, status)
        self.counts[key] = self.counts.get(key, 0) + n

    def add_known(self, topic: str, status: str) -> None:
        """``add(topic, status)`` of one message to a topic known to exist (the caller saw its queues)."""
        key = (topic, status)
        counts = self.counts
        counts[key] = counts.get(key, 0) + 1

    def add_code(self, topic: str, code: int, n: int = 1) -> None:
        self.add(topic, OK if code == _OK_CODE else code_name(code), n)

    def snapshot(self) -> dict[tuple[str, str], int]:
        return dict(list(self.counts.items()))
