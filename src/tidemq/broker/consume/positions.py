"""What each consumer group has consumed of a topic, for the store (store/backlog.py): the space
policy keeps what subscribed groups have not consumed, and cleanup says which groups lost what.

A group is subscribed to a topic once it committed an offset of it (pull consumers,
UpdateOffset: group_offsets.py) or popped from it (ReceiveMessage: pop_state.py). Its position
in a queue is the first offset it has not finished with: the committed offset, or for a pop
group the lowest message still in flight (else its cursor); a group that consumes both ways
counts by the lower. Queues a subscribed group never touched are left out: the store counts
them as not consumed at all.
"""

from __future__ import annotations

from .group_offsets import GroupOffsets
from .pop_state import PopState


def consumed_positions(offsets: GroupOffsets, pop: PopState, topic: str) -> dict[str, dict[int, int]]:
    """{group: {queue id: first offset not consumed}} of ``topic``. Called from the store's
    cleanup thread: it copies the broker's maps before walking them (a copy of a dict is one C
    call under the GIL; RuntimeError, if one changed meanwhile, makes the store ask again)."""
    out: dict[str, dict[int, int]] = {}
    for (g, t, q), off in list(offsets.offsets.items()):
        if t == topic:
            d = out.setdefault(g, {})
            d[q] = min(d.get(q, off), off)
    for (g, t, q), st in list(pop.queues.items()):
        if t == topic:
            off = st.committed
            d = out.setdefault(g, {})
            d[q] = min(d.get(q, off), off)
    return out
