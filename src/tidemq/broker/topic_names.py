"""The names of the topics the broker keeps for itself, in one place.

* the schedule topic (delayed messages wait there: deferred/timer.py) and the half topic
  (transaction half messages: deferred/transactions.py), RocketMQ 5's names; no client sends
  to them nor reads them (``SYSTEM_TOPICS``: refused at send and by every read RPC, hidden from
  the views): what waits there is not due, or not committed (a rolled-back message stays);
* a consumer group's dead-letter topic ``%DLQ%<group>`` (consume/receive.py), RocketMQ's name:
  an ordinary topic a client may read.
"""

from __future__ import annotations

SCHEDULE_TOPIC = "rmq_sys_wheel_timer"              # RocketMQ 5's timer topic
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"             # RocketMQ's half-message topic
SYSTEM_TOPICS = frozenset((SCHEDULE_TOPIC, HALF_TOPIC))
DLQ_PREFIX = "%DLQ%"


def dlq_topic(group: str) -> str:
    """The dead-letter topic of a consumer group."""
    return f"{DLQ_PREFIX}{group}"


def read_refusal(topic: str) -> str | None:
    """Why a client may not read ``topic`` (FORBIDDEN): one of SYSTEM_TOPICS; else None."""
    if topic in SYSTEM_TOPICS:
        return (f"topic {topic!r} is the broker's own (delayed and transactional messages wait there until "
                f"they are due or committed): clients read their real topics")
    return None

