"""What the broker's figures say to people (logs, the CLI, the status page): sizes and
durations in the unit that fits (512 KiB, 40.0 MiB, 1.5 GiB; 45 s, 12.5 min, 3.0 h, 2.1 d), and
the last cleanup in one sentence. Imports nothing of the store or the broker."""

from __future__ import annotations


def human_bytes(n: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def human_seconds(s: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= size:
            return f"{s / size:.1f} {unit}"
    return f"{s:.0f} s"


def until(s: float | None) -> str:
    """A forecast's time: "now", "in 12.5 min"-style durations, or that it will not come."""
    if s is None:
        return "not at this rate"
    if s <= 0:
        return "now"
    return human_seconds(s)


def cleanup_summary(lc: dict, now_s: float, lost_shown: int = 5) -> str:
    """The last cleanup that deleted something (a store's ``last_cleanup``), e.g. "deleted 10
    segments, 40.0 MiB, 20 s ago (space; trigger space); messages gone: T/0 0..999; groups lost
    messages they had not consumed: G T/0 500..999 (500)"."""
    if not lc.get("deleted"):
        return "nothing deleted since start"
    lost = lc.get("lost") or []
    gone = ", ".join(f"{r['topic']}/{r['queue_id']} {r['first']}..{r['end'] - 1}" for r in lost[:lost_shown])
    more = f" and {len(lost) - lost_shown} more queue(s)" if len(lost) > lost_shown else ""
    reasons = "+".join(sorted(set(lc.get("reasons") or []))) or "-"
    return (f"deleted {len(lc['deleted'])} segment(s), {human_bytes(lc['deleted_bytes'])}, "
            f"{human_seconds(max(0.0, now_s - lc['at_ms'] / 1000))} ago ({reasons}; trigger "
            f"{'+'.join(lc['triggers']) or '-'})" + (f"; messages gone: {gone}{more}" if gone else "")
            + _groups_lost(lc.get("groups_lost") or [], lost_shown))


def _groups_lost(losses: list[dict], shown: int) -> str:
    if not losses:
        return ""
    words = ", ".join(f"{g['group']} {g['topic']}/{g['queue_id']} {g['first']}..{g['end'] - 1} ({g['messages']})"
                      for g in losses[:shown])
    more = f" and {len(losses) - shown} more" if len(losses) > shown else ""
    return f"; groups lost messages they had not consumed: {words}{more}"
