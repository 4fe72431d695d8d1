"""StoreConfig / BrokerConfig: defaults, bounds, TOML, environment, renamed settings, errors."""

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
    assert c.message_body_bytes_max == 4 * MIB == 4 * 1024 * 1024
    assert c.pull_in_memory_count_max == 32
    assert c.pull_in_memory_bytes_max == 256 * KIB
    assert c.pull_from_disk_count_max == 8
    assert c.pull_from_disk_bytes_max == 64 * KIB
    assert c.access_message_in_memory_percent_max == 40
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


# Bounds and mistakes ---------------------------------------------------------------------------

def test_value_below_min_is_refused_naming_the_bounds():
    with pytest.raises(ConfigError, match=r"segment_size_bytes: 100 is outside \[4096, "):
        StoreConfig(segment_size_bytes=100)


def test_value_above_max_is_refused():
    with pytest.raises(ConfigError, match="access_message_in_memory_percent_max: 250 is outside"):
        StoreConfig(access_message_in_memory_percent_max=250)
    with pytest.raises(ConfigError, match="flush_interval_ms"):
        StoreConfig(flush_interval_ms=10 ** 9)


def test_value_in_bounds_logs_nothing(caplog):
    with caplog.at_level(logging.WARNING, logger="tidemq.config"):
        c = StoreConfig(segment_size_bytes=64 * KIB, flush_least_pages=0)
    assert c.segment_size_bytes == 64 * KIB
    assert c.flush_least_pages == 0
    assert not [r for r in caplog.records if r.name == "tidemq.config"]


def test_bounds_apply_to_values_from_env_and_toml(tmp_path):
    p = write_toml(tmp_path, "consume_queue_units_per_segment = 1\n")
    with pytest.raises(ConfigError, match="consume_queue_units_per_segment"):
        StoreConfig.load(toml_path=p, env=NO_ENV)
    with pytest.raises(ConfigError, match="index_slots"):
        StoreConfig.load(env={"TIDEMQ_INDEX_SLOTS": "3"})


def test_replace_checks_too():
    with pytest.raises(ConfigError, match="sync_flush_timeout_ms"):
        StoreConfig().replace(sync_flush_timeout_ms=0)


def test_a_fraction_is_never_truncated_and_a_percent_says_what_it_means(tmp_path):
    p = write_toml(tmp_path, "[store]\ndisk_space_clean_forcibly_percent = 0.85\n")
    with pytest.raises(ConfigError, match=r"85 means 85 %\): did you mean 85\?"):
        StoreConfig.load(toml_path=p, env=NO_ENV, section="store")
    with pytest.raises(ConfigError, match="flush_interval_ms: 2.5 is not a whole number"):
        StoreConfig.load(env={"TIDEMQ_FLUSH_INTERVAL_MS": "2.5"})
    assert StoreConfig.load(env={"TIDEMQ_FLUSH_INTERVAL_MS": "250.0"}).flush_interval_ms == 250


def test_renamed_settings_are_read_under_their_old_names_with_a_warning(tmp_path, caplog):
    p = write_toml(tmp_path, "[store]\nmax_message_size_bytes = 1024\ndisk_space_clean_forcibly_ratio = 0.8\n"
                             "disk_max_used_space_ratio = 70\n")
    with caplog.at_level(logging.WARNING, logger="tidemq.config"), pytest.warns(DeprecationWarning):
        c = StoreConfig.load(toml_path=p, env={"TIDEMQ_PULL_MAX_COUNT_IN_MEMORY": "64"}, section="store")
    assert c.message_body_bytes_max == 1024
    assert c.disk_space_clean_forcibly_percent == 80, "a fraction under an old *_ratio name is understood"
    assert c.disk_used_space_percent_max == 70
    assert c.pull_in_memory_count_max == 64
    assert "'max_message_size_bytes' is now 'message_body_bytes_max'" in caplog.text
    from tidemq.config import BrokerConfig
    with pytest.warns(DeprecationWarning):
        assert BrokerConfig.load(env={"TIDEMQ_SEND_HOLD_MAX_MS": "5"}).send_hold_ms_max == 5
    # the new name wins over the old one
    with pytest.warns(DeprecationWarning):
        c = StoreConfig.load(toml_path=p, env={"TIDEMQ_MESSAGE_BODY_BYTES_MAX": "2048"}, section="store")
    assert c.message_body_bytes_max == 2048


def test_unknown_section_variable_and_setting_say_what_was_meant(tmp_path):
    p = write_toml(tmp_path, "[stor]\nflush_interval_ms = 3\n")
    with pytest.raises(ConfigError, match=r"unknown section \[stor\] \(did you mean \[store\]\?\)"):
        StoreConfig.load(toml_path=p, env=NO_ENV, section="store")
    with pytest.raises(ConfigError, match="TIDEMQ_FLUSH_INTERVALL_MS is not a tidemq setting "
                                          r"\(did you mean TIDEMQ_FLUSH_INTERVAL_MS\?\)"):
        StoreConfig.load(env={"TIDEMQ_FLUSH_INTERVALL_MS": "3"})
    p = write_toml(tmp_path, "[store]\nflush_intervall_ms = 3\n", name="b.toml")
    with pytest.raises(ConfigError, match=r"did you mean flush_interval_ms\?"):
        StoreConfig.load(toml_path=p, env=NO_ENV, section="store")


def test_broken_or_missing_files_are_config_errors(tmp_path):
    p = write_toml(tmp_path, "[store\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        StoreConfig.load(toml_path=p, env=NO_ENV)
    with pytest.raises(ConfigError, match="cannot read"):
        StoreConfig.load(toml_path=str(tmp_path / "missing.toml"), env=NO_ENV)


def test_auto_creation_is_one_store_setting_and_the_old_broker_keys_still_work(tmp_path, caplog):
    from tidemq.config import BrokerConfig
    assert StoreConfig().auto_create_topics is False
    assert not hasattr(BrokerConfig(), "auto_create_topics")
    p = write_toml(tmp_path, "[store]\n[broker]\nauto_create_topics = true\ndefault_queue_count = 3\nport = 9000\n")
    with caplog.at_level(logging.WARNING, logger="tidemq.config"):
        s = StoreConfig.load(toml_path=p, env=NO_ENV, section="store")
        b = BrokerConfig.load(toml_path=p, env=NO_ENV, section="broker")
    assert s.auto_create_topics is True and s.topic_queues_default == 3 and b.port == 9000
    assert "[broker] auto_create_topics is now [store] auto_create_topics" in caplog.text


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
    assert (c.alarm_check_interval_ms_max, c.alarm_check_interval_ms_min, c.send_hold_ms_max) == (10_000, 100, 2_000)
    assert not c.auth_enabled and not c.tls_enabled
    with pytest.raises(ConfigError, match="memory_high_watermark_ratio: 1.5 is outside"):
        BrokerConfig.load(env={"TIDEMQ_MEMORY_HIGH_WATERMARK_RATIO": "1.5"})
    with pytest.raises(ConfigError, match="send_hold_ms_max: -1 is outside"):
        BrokerConfig.load(env={"TIDEMQ_SEND_HOLD_MS_MAX": "-1"})
    with pytest.raises(ConfigError, match=r"port: 70000 is outside \[0, 65535\]"):
        BrokerConfig.load(env={"TIDEMQ_PORT": "70000"})


def test_broker_keys_and_tls_files_go_in_pairs_and_the_secret_is_not_shown():
    from tidemq.config import BrokerConfig
    with pytest.raises(ConfigError, match="access_key and secret_key go together"):
        BrokerConfig.load(env={"TIDEMQ_ACCESS_KEY": "ak"})
    with pytest.raises(ConfigError, match="tls_cert_file and tls_key_file go together"):
        BrokerConfig.load(env={"TIDEMQ_TLS_CERT_FILE": "/c.pem"})
    c = BrokerConfig.load(env={"TIDEMQ_ACCESS_KEY": "ak", "TIDEMQ_SECRET_KEY": "very-secret"})
    assert c.auth_enabled and "very-secret" not in repr(c) and "ak" in repr(c)


def test_a_retired_setting_is_ignored_with_a_warning_everywhere_it_can_be_given(tmp_path, caplog):
    from tidemq.config import BrokerConfig
    f = tmp_path / "t.toml"
    f.write_text("[broker]\nsend_records_tag_cache_max = 10\n")
    with caplog.at_level("WARNING", logger="tidemq.config"):
        assert BrokerConfig.load(toml_path=str(f), env={}, section="broker") == BrokerConfig()
        assert BrokerConfig.load(env={"TIDEMQ_SEND_RECORDS_TAG_CACHE_MAX": "10"}) == BrokerConfig()
        assert BrokerConfig.load(env={}, send_records_tag_cache_max=10) == BrokerConfig()
    assert sum("does nothing any more" in r.message for r in caplog.records) == 3


def test_delete_when_hours_are_ascii_digits():
    """"²" is a digit to str.isdigit and no number to int(): a ConfigError naming it, not a ValueError."""
    assert StoreConfig(delete_when="04;16").delete_hours() == frozenset((4, 16))
    for bad in ("²", "0²", "٣", "24"):
        with pytest.raises(ConfigError, match="delete_when"):
            StoreConfig(delete_when=bad)
