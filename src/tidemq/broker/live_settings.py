"""Settings a running broker changes without a restart (`tidemq config set`, admin SetConfig).

A change is checked by the code a start runs (config.py: ``with_setting`` builds the new frozen
config, whose ``__post_init__`` checks type, bounds, choices and the settings that go together), so
``config set`` refuses exactly what ``serve`` refuses; an unknown name gets "did you mean" (and the
names operators bring from Kafka, RabbitMQ and RocketMQ are recognised). Only the settings of
``LIVE`` change at run time: each is applied where the running broker reads it, at once; the others
say they need a restart. A change lasts until the broker restarts (the TOML file keeps it), and is
this member's only (each member of a group is set on its own).
"""

from __future__ import annotations

import dataclasses
import logging

from ..config import BrokerConfig, ConfigError, ReplicationConfig, StoreConfig, did_you_mean

log = logging.getLogger("tidemq.broker")

# setting -> its section, for the ones applied at run time (where: see apply())
STORE_LIVE = ("file_reserved_time_hours", "delete_when", "delete_file_batch_max",
              "delete_commit_log_files_interval_ms", "destroy_mapped_file_interval_forcibly_ms",
              "manual_delete_rounds", "disk_used_space_percent_max", "disk_space_clean_forcibly_percent",
              "disk_space_warning_level_percent")
BROKER_LIVE = ("memory_high_watermark_ratio", "memory_high_watermark_bytes", "disk_free_limit_bytes",
               "send_hold_ms_max", "flush_backlog_high_bytes", "inflight_requests_per_connection_max",
               "inflight_bytes_per_connection_max", "long_polling_s_max", "receive_batch_max", "log_level",
               "quota_throttle_ms_max")
LIVE: dict[str, str] = {**{k: "store" for k in STORE_LIVE}, **{k: "broker" for k in BROKER_LIVE}}
SECTIONS = {"store": StoreConfig, "broker": BrokerConfig, "replication": ReplicationConfig}

# names other brokers use for ours (Kafka, RabbitMQ, RocketMQ), and per-topic settings asked of the broker
SYNONYMS = {
    "retention_hours": "file_reserved_time_hours", "retention_ms": "file_reserved_time_hours",
    "log_retention_hours": "file_reserved_time_hours", "filereservedtime": "file_reserved_time_hours",
    "deletewhen": "delete_when", "vm_memory_high_watermark": "memory_high_watermark_ratio",
    "disk_free_limit": "disk_free_limit_bytes", "diskmaxusedspaceratio": "disk_used_space_percent_max",
    "max_message_bytes": "message_body_bytes_max", "maxmessagesize": "message_body_bytes_max",
}
PER_TOPIC = ("retention_hours", "retention_bytes", "max_message_bytes", "space_policy")


class SettingError(ValueError):
    """A change that cannot be made: ``unknown`` (no such setting), ``restart`` (not at run time),
    or a value the setting refuses (``bad_value``)."""

    def __init__(self, text: str, kind: str) -> None:
        super().__init__(text)
        self.kind = kind


def section_of(name: str) -> str | None:
    """The section a setting (or an old name of one) belongs to, None for none."""
    for sec, cls in SECTIONS.items():
        if name in {f.name for f in dataclasses.fields(cls)} or name in cls.RENAMED:
            return sec
    return None


def canonical(name: str) -> str:
    sec = section_of(name)
    return SECTIONS[sec].RENAMED.get(name, name) if sec else name


def unknown_text(name: str) -> str:
    """'unknown setting X (did you mean Y?)', with a word on per-topic settings where it is one."""
    known = [f.name for cls in SECTIONS.values() for f in dataclasses.fields(cls)]
    key = name.lower().replace(".", "_").replace("-", "_")
    hint = f" (did you mean {SYNONYMS[key]}?)" if key in SYNONYMS else did_you_mean(name, known)
    if key in PER_TOPIC or name in PER_TOPIC:
        hint += f"; {key} of one topic: `tidemq topic config TOPIC --set {key}=VALUE`"
    return f"unknown setting {name!r}{hint}"


def check(name: str, value, store_config: StoreConfig, broker_config: BrokerConfig):
    """(section, the canonical name, the new config of that section) for setting ``name`` to
    ``value``; SettingError saying why not."""
    sec = section_of(name)
    if sec is None:
        raise SettingError(unknown_text(name), "unknown")
    name = canonical(name)
    if name not in LIVE:
        raise SettingError(f"{name} cannot change at run time ([{sec}] of the TOML file or "
                           f"{SECTIONS[sec].env_var(name)}, then a restart); those that can: {', '.join(LIVE)}",
                           "restart")
    base = store_config if sec == "store" else broker_config
    try:
        return sec, name, base.with_setting(name, value)
    except ConfigError as e:
        raise SettingError(str(e), "bad_value") from None


def apply(broker, name: str, value) -> dict:
    """Check and make one change on the running broker (on any thread); the answer says what it
    was and what it is now. SettingError when it cannot be made (nothing changed)."""
    store = broker.store
    sec, name, new = check(name, value, store.config, broker.config)
    before = getattr(store.config if sec == "store" else broker.config, name)
    now = getattr(new, name)
    if sec == "store":
        store.reconfigure(new)
        broker.store_config = new
    else:
        _apply_broker(broker, new, name)
    log.warning("setting %s changed at run time: %r -> %r (until the broker restarts)", name, before, now)
    return {"name": name, "section": sec, "before": before, "value": now}


def _apply_broker(broker, new: BrokerConfig, name: str) -> None:
    svc = broker.service
    if name in ("memory_high_watermark_ratio", "memory_high_watermark_bytes", "disk_free_limit_bytes"):
        # the alarm limits: as SetAlarmLimits sets them (checked at once)
        broker.config = new
        args = {name: getattr(new, name)}
        if name == "disk_free_limit_bytes" and not new.disk_free_limit_bytes:    # 0: two segments, as at start
            args[name] = 2 * broker.store.config.segment_size_bytes
        if name == "memory_high_watermark_ratio":
            args["memory_high_watermark_bytes"] = new.memory_high_watermark_bytes
        broker.set_alarm_limits(**args)
    broker.config = new
    if svc is not None:
        svc.config = new
        svc.consumption.config = new                      # receive_batch_max, long_polling_s_max
        svc.pulls.wait_s_max = new.long_polling_s_max
        gate = svc.gate
        gate.backlog_high_bytes = new.flush_backlog_high_bytes
        gate.hold_max_s = new.send_hold_ms_max / 1000
        gate.inflight_requests_max = new.inflight_requests_per_connection_max
        gate.inflight_bytes_max = new.inflight_bytes_per_connection_max
    if getattr(broker, "quotas", None) is not None:
        broker.quotas.throttle_s_max = new.quota_throttle_ms_max / 1000
    if name == "log_level":
        logging.getLogger("tidemq").setLevel(new.log_level or logging.NOTSET)


def marks(store_config: StoreConfig, broker_config: BrokerConfig) -> dict[str, str]:
    """setting -> "live" or "restart", for `config show`."""
    out = {}
    for sec, cfg in (("store", store_config), ("broker", broker_config)):
        for f in dataclasses.fields(cfg):
            out[f.name] = "live" if LIVE.get(f.name) == sec else "restart"
    return out
