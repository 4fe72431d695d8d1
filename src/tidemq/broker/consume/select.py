"""Which of a queue's visible messages a receive hands out first, for lite consumers (lite.py) and
topics with PRIORITY messages; every other receive takes the queue in offset order (receive.py).

A receive that selects looks, in one queue, at the messages returned to it (their invisible time
over, or set aside by an earlier receive) and at up to ``priority_window_messages`` new ones from
the group's cursor, and

* keeps for itself the ones it may have (a lite consumer: of its lite topics), highest priority
  first (wire.PROP_PRIORITY; larger is higher, a message without one ranks as 0), then in offset
  order, up to its batch;
* sets aside the new ones it may have but does not take, and the ones of another client's lite
  topics: in flight with attempt 0, visible at once (pop_state.deliver), so the next receive
  finds them among the returned ones, and a kill -9 keeps them (the pop journal);
* passes over, for the group, messages of lite topics no client of the group subscribes (done,
  as a tag filter passes over a message).

FIFO consumer groups never select: their order is the queue's.
"""

from __future__ import annotations

from ...store import GetStatus
from ..observe.outcomes import OK, REDELIVERED
from ..wire import PROP_LITE_TOPIC, priority_of, to_wire
from .pop_state import NOT_READABLE

GIVE, LEAVE, PASS = 0, 1, 2
SKIP = (GetStatus.OFFSET_TOO_SMALL, GetStatus.NO_MATCHED_MESSAGE, GetStatus.MESSAGE_WAS_REMOVING,
        GetStatus.OFFSET_FOUND_NULL, GetStatus.MESSAGE_DAMAGED)


HELD_MAX_WINDOWS = 64      # a queue of a group holds at most this many windows in flight before it reads new ones


class Selector:
    """``mine`` / ``anyone``: the receiving client's lite topics and the group's (None: not lite);
    ``by_priority``: hand out higher priorities first."""
    __slots__ = ("mine", "anyone", "by_priority")

    def __init__(self, mine: frozenset | None, anyone: frozenset | None, by_priority: bool) -> None:
        self.mine, self.anyone, self.by_priority = mine, anyone, by_priority

    def pick(self, props) -> int:
        return GIVE if self.mine is None else self.pick_lite(props.get(PROP_LITE_TOPIC))

    def pick_lite(self, lt: str | None) -> int:
        if lt is not None and lt in self.mine:
            return GIVE
        if lt is not None and lt in self.anyone:
            return LEAVE
        return PASS

    def key(self, m) -> tuple:
        if not self.by_priority:
            return (m.queue_offset,)
        return (-(priority_of(m.properties) or 0), m.queue_offset)


def pop_selected(c, group: str, topic: str, q: int, out: list, batch: int, now: int, invisible_ms: int, sub,
                 renew_for: str, renew_until: int, sel: Selector, attempts_max: int) -> None:
    """One queue of a selecting receive (c: the receive.Consumption): see the module's docstring.

    At most ``priority_window_messages`` messages it may have (or passes over) are looked at,
    returned ones first, so at most that many wait set aside for their priority; messages set aside
    for another lite consumer do not count and are not read again while that client still
    subscribes their lite topic (their lite topics are remembered in ``c.aside``). A queue with
    HELD_MAX_WINDOWS windows in flight for the group reads no new message (a lite consumer that
    subscribes and never receives holds its group up there)."""
    pop = c.pop
    window = max(c.config.priority_window_messages, batch - len(out))    # a batch is never cut by it
    st = pop.state(group, topic, q)
    known = c.aside.setdefault((group, topic, q), {})       # offset -> lite topic of one set aside for another
    if len(known) > len(st.inflight):
        for o in [o for o in known if o not in st.inflight]:
            del known[o]
    need = batch - len(out)
    cands: list = []                        # (key, message, attempt, fresh)
    examined = 0
    for o in sorted(o for o, i in st.inflight.items() if i.visible_at_ms <= now):
        if examined >= window:
            break
        lt = known.get(o)
        if lt is not None and sel.mine is not None and sel.pick_lite(lt) == LEAVE:
            continue                                # still another client's: not read again
        examined += 1
        inf = st.inflight[o]
        m = c.read_at(topic, q, o)
        if m is NOT_READABLE:                       # there, not readable now: stays in flight
            continue
        if m is None:                               # cleaned from the store meanwhile
            pop.drop(group, topic, q, o)
            continue
        p = sel.pick(m.properties)
        if p == PASS:
            pop.drop(group, topic, q, o)
        elif p == LEAVE:
            known[o] = m.properties.get(PROP_LITE_TOPIC)
        elif inf.attempt >= attempts_max:
            c.give_up(group, topic, q, o, m, f"after {inf.attempt} deliveries")
        else:
            cands.append((sel.key(m), m, inf.attempt, False))
    aside: list = []                        # new ones set aside: (offset, lite topic or None)
    cursor = st.cursor
    budget = window - len(cands)
    held_max = HELD_MAX_WINDOWS * window
    looked = 0                              # new ones read, those set aside for another client not counted
    while (looked < budget and (sel.by_priority or len(cands) < need)
           and len(st.inflight) + len(aside) < held_max):
        g = c.store.get(group, topic, q, cursor, max_count=min(32, budget - looked), tags=sub.tags,
                        match=sub.match)
        if g.status is GetStatus.FOUND:
            for m in g.messages:
                p = sel.pick(m.properties)
                if p == GIVE:
                    cands.append((sel.key(m), m, 0, True))
                elif p == LEAVE:
                    aside.append((m.queue_offset, m.properties.get(PROP_LITE_TOPIC)))
                    continue
                looked += 1
        elif not (g.status in SKIP and g.next_offset > cursor):
            break
        if g.next_offset <= cursor:
            break
        cursor = g.next_offset
    cands.sort(key=lambda x: x[0])
    for _, m, attempt, fresh in cands[:need]:
        h = pop.deliver(group, topic, q, m.queue_offset, attempt + 1, now + invisible_ms, renew_for, renew_until,
                        m.commitlog_offset)
        out.append(to_wire(m, attempt + 1, h, invisible_ms))
        c.got.add(topic, REDELIVERED if attempt else OK)
    for _, m, _, fresh in cands[need:]:
        if fresh:
            aside.append((m.queue_offset, None))
    for o, lt in aside:                      # in the journal before the cursor moves past them
        pop.deliver(group, topic, q, o, 0, now)
        if lt is not None:
            known[o] = lt
    pop.skip_to(group, topic, q, cursor)
