"""StoreConfig: defaults, clamping, TOML, environment, errors."""

from __future__ import annotations

import dataclasses
import logging
import os

import pytest

from tidemq.config import GIB, KIB, MIB, ConfigError, StoreConfig

NO_ENV: dict[str, str] = {}


def write_toml(tmp_path, text: str, name: str = "tidemq.toml") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


# Defaults ---------------------------------------------------------------------------

def test_defaults_follow_rocketmq():
    c = StoreConfig()
    assert c.segment_size_bytes == 1 * GIB == 1024 ** 3
    assert c.flush_interval_ms == 500
    assert c.flush_least_pages == 4
    assert c.flush_thorough_interval_ms == 10_000
    assert c.sync_flush_timeout_ms == 5_000
    assert c.max_message_size_bytes == 4 * MIB == 4 * 1024 * 1024
    assert c.pull_max_count_in_memory == 32
    assert c.pull_max_bytes_in_memory == 256 * KIB
    assert c.pull_max_count_from_disk == 8
    assert c.pull_max_bytes_from_disk == 64 * KIB
    assert c.access_message_in_memory_ratio_max_percent == 40
    assert c.consume_queue_units_per_segment == 300_000
    assert c.flush_disk_type == "ASYNC_FLUSH"
    assert c.sync_flush is False
    assert c.commitlog_dirs == ()


def test_load_with_nothing_gives_the_defaults():
    assert StoreConfig.load(env=NO_ENV) == StoreConfig()


def test_config_is_frozen():
    c = StoreConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.segment_size_bytes = 1  # type: ignore[misc]


def test_derived_paths(tmp_path):
    c = StoreConfig(root_dir=str(tmp_path))
    assert c.commitlog_paths == (os.path.join(str(tmp_path), "commitlog"),)
    assert c.consumequeue_path == os.path.join(str(tmp_path), "consumequeue")
    assert c.index_path == os.path.join(str(tmp_path), "index")
    assert c.config_path == os.path.join(str(tmp_path), "config")
    assert c.checkpoint_path == os.path.join(str(tmp_path), "checkpoint")
    assert c.abort_path == os.path.join(str(tmp_path), "abort")
    c2 = StoreConfig(root_dir=str(tmp_path), commitlog_dirs=("/d1", "/d2"))
    assert c2.commitlog_paths == ("/d1", "/d2")


def test_describe_lists_every_setting_with_doc_and_bounds():
    rows = {name: (default, doc, lo, hi) for name, default, doc, lo, hi in StoreConfig.describe()}
    assert set(rows) == {f.name for f in dataclasses.fields(StoreConfig)}
    assert all(doc for _d, doc, _lo, _hi in rows.values())
    assert rows["segment_size_bytes"][0] == GIB
    assert rows["segment_size_bytes"][2] == 4 * KIB


# Clamping ---------------------------------------------------------------------------

def test_value_below_min_is_clamped_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="tidemq.config"):
        c = StoreConfig(segment_size_bytes=100)
    assert c.segment_size_bytes == 4 * KIB
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "segment_size_bytes" in warnings[0].getMessage()


def test_value_above_max_is_clamped_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="tidemq.config"):
        c = StoreConfig(access_message_in_memory_ratio_max_percent=250, flush_interval_ms=10 ** 9)
    assert c.access_message_in_memory_ratio_max_percent == 100
    assert c.flush_interval_ms == 60_000
    msgs = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert "access_message_in_memory_ratio_max_percent" in msgs
    assert "flush_interval_ms" in msgs


def test_value_in_bounds_logs_nothing(caplog):
    with caplog.at_level(logging.WARNING, logger="tidemq.config"):
        c = StoreConfig(segment_size_bytes=64 * KIB, flush_least_pages=0)
    assert c.segment_size_bytes == 64 * KIB
    assert c.flush_least_pages == 0
    assert not [r for r in caplog.records if r.name == "tidemq.config"]


def test_clamp_applies_to_values_from_env_and_toml(tmp_path, caplog):
    p = write_toml(tmp_path, "consume_queue_units_per_segment = 1\n")
    with caplog.at_level(logging.WARNING, logger="tidemq.config"):
        c = StoreConfig.load(toml_path=p, env={"TIDEMQ_INDEX_SLOTS": "3"})
    assert c.consume_queue_units_per_segment == 16
    assert c.index_slots == 16
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 2


def test_replace_clamps_too(caplog):
    with caplog.at_level(logging.WARNING, logger="tidemq.config"):
        c = StoreConfig().replace(sync_flush_timeout_ms=0)
    assert c.sync_flush_timeout_ms == 1
    assert any("sync_flush_timeout_ms" in r.getMessage() for r in caplog.records)


def test_auto_renew_ahead_is_kept_under_the_step(caplog):
    from tidemq.config import BrokerConfig
    with caplog.at_level(logging.WARNING, logger="tidemq.config"):
        c = BrokerConfig(auto_renew_ahead_s=10.0, auto_renew_step_s=4.0)
    assert c.auto_renew_ahead_s == 2.0
    assert any("auto_renew_ahead_s" in r.getMessage() for r in caplog.records)


# TOML -------------------------------------------------------------------------------

def test_toml_top_level_keys(tmp_path):
    p = write_toml(tmp_path, 'segment_size_bytes = 65536\nflush_disk_type = "SYNC_FLUSH"\n'
                             'auto_create_topics = false\ncommitlog_dirs = ["/a", "/b"]\n')
    c = StoreConfig.load(toml_path=p, env=NO_ENV)
    assert c.segment_size_bytes == 65536
    assert c.flush_disk_type == "SYNC_FLUSH" and c.sync_flush
    assert c.auto_create_topics is False
    assert c.commitlog_dirs == ("/a", "/b")
    # untouched settings keep their defaults
    assert c.flush_interval_ms == 500


def test_toml_without_section_given_a_section_name(tmp_path):
    """A file without [store] read with section='store' uses its top-level keys."""
    p = write_toml(tmp_path, "flush_interval_ms = 250\n")
    c = StoreConfig.load(toml_path=p, env=NO_ENV, section="store")
    assert c.flush_interval_ms == 250


def test_toml_store_section(tmp_path):
    p = write_toml(tmp_path, '[store]\nflush_interval_ms = 250\nroot_dir = "/srv/tidemq"\n\n'
                             '[broker]\nlisten = "0.0.0.0:8081"\n')
    c = StoreConfig.load(toml_path=p, env=NO_ENV, section="store")
    assert c.flush_interval_ms == 250
    assert c.root_dir == "/srv/tidemq"


def test_toml_other_sections_are_ignored(tmp_path):
    """Another component's section does not make the store config fail."""
    p = write_toml(tmp_path, 'flush_interval_ms = 300\n[broker]\nlisten = "0.0.0.0:8081"\n')
    c = StoreConfig.load(toml_path=p, env=NO_ENV)
    assert c.flush_interval_ms == 300


def test_toml_unknown_key_raises(tmp_path):
    p = write_toml(tmp_path, "segment_size = 65536\n")
    with pytest.raises(ConfigError, match="segment_size"):
        StoreConfig.load(toml_path=p, env=NO_ENV)


def test_toml_unknown_key_in_store_section_raises(tmp_path):
    p = write_toml(tmp_path, "[store]\nflush_intervall_ms = 3\n")
    with pytest.raises(ConfigError, match="flush_intervall_ms"):
        StoreConfig.load(toml_path=p, env=NO_ENV, section="store")


def test_toml_wrong_type_raises(tmp_path):
    p = write_toml(tmp_path, 'segment_size_bytes = "big"\n')
    with pytest.raises(ConfigError, match="segment_size_bytes"):
        StoreConfig.load(toml_path=p, env=NO_ENV)


def test_toml_bad_choice_raises(tmp_path):
    p = write_toml(tmp_path, 'flush_disk_type = "SOMETIMES"\n')
    with pytest.raises(ConfigError, match="flush_disk_type"):
        StoreConfig.load(toml_path=p, env=NO_ENV)


# Environment ------------------------------------------------------------------------

def test_env_vars(tmp_path):
    env = {
        "TIDEMQ_SEGMENT_SIZE_BYTES": "131072",
        "TIDEMQ_FLUSH_DISK_TYPE": "SYNC_FLUSH",
        "TIDEMQ_INDEX_ENABLED": "false",
        "TIDEMQ_AUTO_CREATE_TOPICS": "no",
        "TIDEMQ_PREALLOCATE_NEXT_SEGMENT": "1",
        "TIDEMQ_ROOT_DIR": str(tmp_path),
        "UNRELATED": "x",
    }
    c = StoreConfig.load(env=env)
    assert c.segment_size_bytes == 131072
    assert c.flush_disk_type == "SYNC_FLUSH"
    assert c.index_enabled is False
    assert c.auto_create_topics is False
    assert c.preallocate_next_segment is True
    assert c.root_dir == str(tmp_path)


def test_env_is_read_from_os_environ_by_default(monkeypatch):
    monkeypatch.setenv("TIDEMQ_FLUSH_LEAST_PAGES", "9")
    assert StoreConfig.load().flush_least_pages == 9


def test_precedence_defaults_toml_env_overrides(tmp_path):
    p = write_toml(tmp_path, "flush_interval_ms = 100\nflush_least_pages = 7\nindex_slots = 100\n")
    env = {"TIDEMQ_FLUSH_INTERVAL_MS": "200", "TIDEMQ_FLUSH_LEAST_PAGES": "8"}
    c = StoreConfig.load(toml_path=p, env=env, flush_interval_ms=300)
    assert c.flush_interval_ms == 300     # override > env > toml
    assert c.flush_least_pages == 8       # env > toml
    assert c.index_slots == 100           # toml > default
    assert c.index_entries == 20_000_000  # default


@pytest.mark.parametrize("raw, expected", [
    ("/a:/b", ("/a", "/b")),
    ("/a,/b", ("/a", "/b")),
    ("/a, /b ,/c", ("/a", "/b", "/c")),
    ("/only", ("/only",)),
    ("", ()),
])
def test_commitlog_dirs_from_env(raw, expected):
    c = StoreConfig.load(env={"TIDEMQ_COMMITLOG_DIRS": raw})
    assert c.commitlog_dirs == expected


@pytest.mark.parametrize("raw", ["/x/a:/x/b", "/x/a,/x/b"])
def test_commitlog_dirs_as_string_argument(raw):
    c = StoreConfig(commitlog_dirs=raw)  # type: ignore[arg-type]
    assert c.commitlog_dirs == ("/x/a", "/x/b")
    assert c.commitlog_paths == ("/x/a", "/x/b")


def test_commitlog_dirs_as_string_in_toml(tmp_path):
    p = write_toml(tmp_path, 'commitlog_dirs = "/m/a:/m/b"\n')
    assert StoreConfig.load(toml_path=p, env=NO_ENV).commitlog_dirs == ("/m/a", "/m/b")


def test_commitlog_dirs_list_becomes_tuple():
    c = StoreConfig(commitlog_dirs=["/a", "/b"])  # type: ignore[arg-type]
    assert c.commitlog_dirs == ("/a", "/b")
    assert isinstance(c.commitlog_dirs, tuple)


def test_env_bad_int_raises():
    with pytest.raises(ConfigError, match="flush_interval_ms"):
        StoreConfig.load(env={"TIDEMQ_FLUSH_INTERVAL_MS": "soon"})


def test_env_bad_bool_raises():
    with pytest.raises(ConfigError, match="index_enabled"):
        StoreConfig.load(env={"TIDEMQ_INDEX_ENABLED": "maybe"})


def test_env_bad_choice_raises():
    with pytest.raises(ConfigError, match="flush_disk_type"):
        StoreConfig.load(env={"TIDEMQ_FLUSH_DISK_TYPE": "sync_flush"})


# Errors -----------------------------------------------------------------------------

def test_unknown_override_raises():
    with pytest.raises(ConfigError, match="no_such_setting"):
        StoreConfig.load(env=NO_ENV, no_such_setting=1)


def test_bad_choice_in_constructor_raises():
    with pytest.raises(ConfigError, match="flush_disk_type"):
        StoreConfig(flush_disk_type="FAST")


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


def test_broker_protection_defaults_and_clamping(caplog):
    from tidemq.config import BrokerConfig
    c = BrokerConfig.load(env={})
    assert c.host == "127.0.0.1", "nothing listens beyond loopback unless configured"
    assert (c.memory_high_watermark_ratio, c.memory_high_watermark_bytes, c.disk_free_limit_bytes) == (0.4, 0, 0)
    assert (c.alarm_check_interval_max_ms, c.alarm_check_interval_min_ms, c.send_hold_max_ms) == (10_000, 100, 2_000)
    assert not c.auth_enabled and not c.tls_enabled
    with caplog.at_level(logging.WARNING, logger="tidemq.config"):
        c = BrokerConfig.load(env={"TIDEMQ_MEMORY_HIGH_WATERMARK_RATIO": "1.5", "TIDEMQ_SEND_HOLD_MAX_MS": "-1"})
    assert c.memory_high_watermark_ratio == 0.95 and c.send_hold_max_ms == 0
    assert "memory_high_watermark_ratio" in caplog.text


def test_broker_keys_and_tls_files_go_in_pairs_and_the_secret_is_not_shown():
    from tidemq.config import BrokerConfig
    with pytest.raises(ConfigError, match="access_key and secret_key go together"):
        BrokerConfig.load(env={"TIDEMQ_ACCESS_KEY": "ak"})
    with pytest.raises(ConfigError, match="tls_cert_file and tls_key_file go together"):
        BrokerConfig.load(env={"TIDEMQ_TLS_CERT_FILE": "/c.pem"})
    c = BrokerConfig.load(env={"TIDEMQ_ACCESS_KEY": "ak", "TIDEMQ_SECRET_KEY": "very-secret"})
    assert c.auth_enabled and "very-secret" not in repr(c) and "ak" in repr(c)
