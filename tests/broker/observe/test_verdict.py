"""One verdict from the store's refusal, the alarms and the flush backlog."""

from types import SimpleNamespace

from tidemq.broker.observe.verdict import write_verdict
from tidemq.broker.protection.alarms import AlarmState
from tidemq.store import PutReason


def gate(memory=False, disk=False, backlog=0, high=100):
    alarms = SimpleNamespace(memory=AlarmState("memory", raised=memory, message="memory alarm: x"),
                             disk=AlarmState("disk", raised=disk, message="disk alarm: y"))
    return SimpleNamespace(alarms=alarms, backlog_bytes=lambda: backlog, backlog_high_bytes=high)


def store(refusal=None):
    return SimpleNamespace(put_refusal=lambda: refusal)


def test_accepted_when_nothing_stands_in_the_way():
    assert write_verdict(gate(), store()) == {"writes": "accepted", "reasons": []}


def test_alarms_and_backlog_hold_and_name_every_reason():
    v = write_verdict(gate(memory=True, disk=True, backlog=500), store())
    assert v["writes"] == "held"
    assert [r["code"] for r in v["reasons"]] == ["MEMORY_ALARM", "DISK_ALARM", "FLUSH_BACKLOG"]


def test_the_store_refusing_wins_and_keeps_the_other_reasons():
    v = write_verdict(gate(disk=True), store((PutReason.DISK_FULL, "disk full: 91 % used")))
    assert v["writes"] == "refused"
    assert [(r["source"], r["code"]) for r in v["reasons"]] == [("store", "DISK_FULL"), ("disk_alarm", "DISK_ALARM")]
