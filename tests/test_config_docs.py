"""tidemq/config_docs.py: docs/configuration.md is generated from config.py, says everything an
operator needs of every setting, and is never stale."""

from __future__ import annotations

import dataclasses
import pathlib

import pytest

from tidemq import config, config_docs
from tidemq.config import BrokerConfig, ReplicationConfig, StoreConfig
from tidemq.protocol import admin

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "configuration.md"


def row(text: str, name: str) -> str:
    """The table row of setting ``name`` in the rendered document."""
    [line] = [s for s in text.splitlines() if s.startswith(f'| <a id="{name}"></a>')]
    return line


def test_docs_configuration_md_is_current():
    """Fails after a setting is added or changed in config.py until the file is regenerated."""
    why = config_docs.stale(str(DOC))
    assert why is None, f"docs/configuration.md is stale: run {config_docs.REGENERATE}\n{why}"


def test_every_setting_of_every_section_has_a_row_with_section_and_variable():
    text = config_docs.render()
    assert set(config.SECTIONS) == {"store", "broker", "replication", "client"}
    for section, cls in config.SECTIONS.items():
        body = text.split(f"## [{section}]\n", 1)[1].split("\n## ", 1)[0]
        for f in dataclasses.fields(cls):
            line = row(body, cls.ENV_INFIX.lower() + f.name)
            assert f"`{cls.env_var(f.name)}`" in line
            assert cls.env_var(f.name) == "TIDEMQ_" + ("CLIENT_" if section == "client" else "") + f.name.upper()
            assert " ".join(f.metadata["doc"].split()).split("<")[0].replace("|", "\\|")[:40] in line


def test_each_row_gives_unit_default_bounds_and_run_time():
    text = config_docs.render()
    cells = [c.strip() for c in row(text, "segment_size_bytes").strip("|").split(" | ")]
    assert cells[1:5] == ["bytes", "`1073741824` (1 GiB)", "`4096` (4 KiB) to `2147483647`", "no: restart"]
    cells = [c.strip() for c in row(text, "flush_disk_type").strip("|").split(" | ")]
    assert cells[2:4] == ['`"ASYNC_FLUSH"`', "`ASYNC_FLUSH`, `SYNC_FLUSH`"]
    cells = [c.strip() for c in row(text, "file_reserved_time_hours").strip("|").split(" | ")]
    assert cells[1:3] == ["hours", "`72.0` (3 d)"]


@pytest.mark.parametrize("name, unit", [
    ("send_hold_ms_max", "ms"), ("sync_flush_gather_us_max", "µs"), ("long_polling_s_max", "seconds"),
    ("file_reserved_time_hours", "hours"), ("commitlog_warm_ahead_mib", "MiB"),
    ("disk_used_space_percent_max", "percent"), ("memory_high_watermark_ratio", "fraction (0-1)"),
    ("flush_backlog_high_bytes", "bytes"), ("inflight_bytes_per_connection_max", "bytes per connection"),
    ("consume_queue_units_per_segment", "units per segment"), ("index_slots", "slots"),
    ("recovery_scan_segments_normal", "segments"), ("topic_queues_default", "queues"),
    ("delete_file_batch_max", "count"), ("metrics_port", "TCP port"), ("index_enabled", "true / false"),
    ("commitlog_dirs", "list of text"), ("flush_disk_type", "one of"), ("broker_name", "text"),
])
def test_unit_comes_from_the_name_and_type(name, unit):
    fields = {f.name: f for c in config.SECTIONS.values() for f in dataclasses.fields(c)}
    assert config_docs.unit(fields[name]) == unit


def test_run_time_column_follows_the_admin_protocols_list(monkeypatch):
    """The settings `tidemq config set` may change come from tidemq.protocol.admin.ALARM_LIMITS, not
    from a list of the generator's own: a setting added there is documented as changeable."""
    text = config_docs.render()
    for name in admin.ALARM_LIMITS:
        assert "yes: `tidemq config set`" in row(text, name)
    assert "no: restart" in row(text, "send_hold_ms_max")
    monkeypatch.setattr(admin, "ALARM_LIMITS", admin.ALARM_LIMITS + ("send_hold_ms_max",))
    assert "yes: `tidemq config set`" in row(config_docs.render(), "send_hold_ms_max")


def test_renamed_and_moved_names_point_to_the_new_ones():
    text = config_docs.render()
    for cls in (StoreConfig, BrokerConfig, ReplicationConfig):
        for old, new in cls.RENAMED.items():
            assert f"| `{old}` (`TIDEMQ_{old.upper()}`) | `[{cls.SECTION}]` | [`{new}`](#{new}) |" in text
            assert f"`{old}`" in row(text, new)
        for old, (sect, new) in cls.MOVED_IN.items():
            assert f"| `{old}` | `[{sect}]` | [`[{cls.SECTION}]` `{new}`](#{new}) |" in text


def test_retired_settings_are_listed_with_why(monkeypatch):
    text = config_docs.render()
    for cls in config.SECTIONS.values():
        for name, why in cls.RETIRED.items():
            assert f"| `{name}` (`TIDEMQ_{name.upper()}`) | `[{cls.SECTION}]` | {why} |" in text
            assert f'<a id="{name}">' not in text
    monkeypatch.setattr(ReplicationConfig, "RETIRED", {"old_knob_ms": "nothing waits any more"})
    assert "| `old_knob_ms` (`TIDEMQ_OLD_KNOB_MS`) | `[replication]` | nothing waits any more |" in config_docs.render()


def test_secrets_are_marked_and_text_is_not_taken_for_html():
    text = config_docs.render()
    assert "secret: shown masked" in row(text, "secret_key")
    assert "secret" not in row(text, "access_key").split(" | ")[-1].replace("secret_key", "")
    assert "%DLQ%&lt;group&gt;" in row(text, "delivery_attempts_max")


def test_check_names_the_command_and_writing_makes_it_current(tmp_path, capsys):
    out = tmp_path / "configuration.md"
    assert config_docs.main(["--check", "--output", str(out)]) == 1        # missing
    assert f"run {config_docs.REGENERATE}" in capsys.readouterr().err
    out.write_text(config_docs.render().replace("`1073741824` (1 GiB)", "`1` (1 byte)"))
    assert config_docs.main(["--check", "--output", str(out)]) == 1
    err = capsys.readouterr().err
    assert "is stale: run scripts/config-docs" in err and "1073741824" in err
    assert config_docs.main(["--output", str(out)]) == 0
    assert out.read_text() == config_docs.render()
    assert config_docs.main(["--check", "--output", str(out)]) == 0


def test_the_regenerating_script_exists_and_runs_the_generator():
    script = ROOT / config_docs.REGENERATE
    assert script.is_file() and script.stat().st_mode & 0o111
    assert "-m tidemq.config_docs" in script.read_text()
