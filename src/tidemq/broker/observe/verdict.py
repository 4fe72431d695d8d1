"""The one verdict on writes: are sends accepted now, and if not, every reason.

A send meets two deciders (broker/protection/flow.SendGate: alarms, flush backlog, held then
refused; the store's own refusal, store.put_refusal: disk full, archive pending, a failed
segment, not running). Every view (``tidemq status``, ``alarms``, the metrics, the status page)
shows this verdict, so they cannot disagree.

    {"writes": "accepted" | "held" | "refused",
     "reasons": [{"source": "store" | "memory_alarm" | "disk_alarm" | "flush_backlog",
                  "code": str, "text": str}]}

"held": sends wait up to send_hold_ms_max for the cause to clear, then are refused with
TOO_MANY_REQUESTS; "refused": the store refuses them at once.
"""

from __future__ import annotations

from ..protection.alarms import human

ACCEPTED, HELD, REFUSED = "accepted", "held", "refused"
STORE = "store"            # the source of the store's own refusals; every other source holds sends


def write_verdict(gate, store) -> dict:
    reasons = []
    why = store.put_refusal()
    if why is not None:
        reasons.append({"source": STORE, "code": why[0].name, "text": why[1]})
    alarms = gate.alarms
    if alarms is not None:
        for a in (alarms.memory, alarms.disk):
            if a.raised:
                reasons.append({"source": f"{a.resource}_alarm", "code": f"{a.resource.upper()}_ALARM",
                                "text": a.message})
    backlog = gate.backlog_bytes()
    if backlog > gate.backlog_high_bytes:
        reasons.append({"source": "flush_backlog", "code": "FLUSH_BACKLOG",
                        "text": f"flush backlog {human(backlog)} > flush_backlog_high_bytes "
                                f"{human(gate.backlog_high_bytes)}"})
    state = REFUSED if why is not None else HELD if reasons else ACCEPTED
    return {"writes": state, "reasons": reasons}
