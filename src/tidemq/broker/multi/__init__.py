"""Several broker processes on one machine, one cluster to clients (``tidemq serve --processes N``).

One Python broker process uses about one core; on the official clients' path (one message per
SendMessage) that is a few thousand messages a second. Here N member processes each serve their
own store (``<root>/p<i>``) on their own port (``port + i``), and a topic's queues are split among
them (queue q to member q % N): QueryRoute from any member lists every queue with its member's
endpoint, as a topic spread over broker groups is listed (replication/routes.py), so the official
clients send each message to the member that owns its queue with no hop between processes.

The layout under the parent's root (names here, the stores' own layout is tidemq/layout.py)::

    <root>/multi/lock          the parent's lock: one parent per root
    <root>/multi/members.json  {"processes": N, "members": [{"endpoint", "pid", "metrics"}]}: the
                               parent writes it (a member restarted: its new pid); members read it
    <root>/multi/topics.json   {"topics": {name: queue count}}: written by the member that takes a
                               CreateTopic (under topics.lock), read by every member
    <root>/p0, <root>/p1, ...  each member's store root

supervisor.py is the parent (starts, restarts, stops the members); siblings.py is what a member
knows of the others (routes, the topics' split); member.py runs one member.
"""

from __future__ import annotations

import os

MULTI_DIR = "multi"
MEMBERS_FILE = "members.json"
TOPICS_FILE = "topics.json"
TOPICS_LOCK = "topics.lock"
PARENT_LOCK = "lock"


def member_root(root: str, index: int) -> str:
    return os.path.join(root, f"p{index}")


def multi_dir(root: str) -> str:
    return os.path.join(root, MULTI_DIR)


def owned_queues(index: int, count: int, queues: int) -> tuple[int, ...]:
    """The queues of a topic of ``queues`` queues that member ``index`` of ``count`` owns."""
    return tuple(q for q in range(queues) if q % count == index)
