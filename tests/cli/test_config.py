"""tidemq.cli.config: `tidemq config show` (every setting, those changeable at run time marked) and
`config set` (a run-time setting until restart, checked by the code `serve` runs: name with "did you
mean", type, bounds; others refused) against a real broker."""

import json

from tidemq.broker.live_settings import LIVE

from ..support.cli import run


def test_config_show_marks_run_time_settings_and_set_changes_one(broker):
    ep = ("--endpoint", broker.endpoint)
    doc = json.loads(run("config", "show", "--json", *ep).output)
    assert doc["store"]["root_dir"] == broker.root and doc["broker"]["metrics_port"] == 0
    assert set(doc["changeable_at_run_time"]) == set(LIVE) >= {
        "memory_high_watermark_bytes", "memory_high_watermark_ratio", "disk_free_limit_bytes",
        "file_reserved_time_hours", "disk_used_space_percent_max", "send_hold_ms_max", "long_polling_s_max",
        "log_level"}
    shown = run("config", "show", *ep).output
    marked = {line.split("│")[2].strip() for line in shown.splitlines()
              if line.count("│") >= 5 and "live (config set)" in line}
    assert marked == set(doc["changeable_at_run_time"]), shown
    r = run("config", "set", "disk_free_limit_bytes", 12345, *ep)
    assert r.exit_code == 0 and "until it restarts" in r.output
    assert json.loads(run("alarms", "--json", *ep).output)["disk"]["limit_bytes"] == 12345
    r = run("config", "set", "segment_size_bytes", 1, *ep)
    assert r.exit_code == 1 and "cannot change at run time" in r.output


def test_set_refuses_what_serve_refuses_and_changes_what_it_may(broker):
    ep = ("--endpoint", broker.endpoint)
    for value in ("0.99", "0.001"):        # serve refuses both: outside [0.01, 0.95] (0.001 held every send)
        r = run("config", "set", "memory_high_watermark_ratio", value, *ep)
        assert r.exit_code == 1 and "outside [0.01, 0.95]" in r.output, r.output
    r = run("config", "set", "retention_hours", 1, *ep)
    assert r.exit_code == 1 and "unknown setting" in r.output and "did you mean file_reserved_time_hours" in r.output
    assert "topic config" in r.output, "retention_hours is a topic's: says where"
    r = run("config", "set", "file_reserved_time_hour", 1, *ep)
    assert r.exit_code == 1 and "did you mean file_reserved_time_hours" in r.output
    r = run("config", "set", "send_hold_ms_max", "soon", *ep)
    assert r.exit_code == 1 and "send_hold_ms_max" in r.output and "int" in r.output
    r = run("config", "set", "delete_file_batch_max", "2.5", *ep)
    assert r.exit_code == 1 and "not a whole number" in r.output
    r = run("config", "set", "log_level", "LOUD", *ep)
    assert r.exit_code == 1 and "not one of" in r.output
    r = run("config", "set", "disk_max_used_space_ratio", 60, *ep)      # an old name: the new one changes
    assert r.exit_code == 0 and "disk_used_space_percent_max = 60" in r.output and "[store]" in r.output
    r = run("config", "set", "file_reserved_time_hours", "1.5", *ep)
    assert r.exit_code == 0 and "(was 72.0)" in r.output
    for k, v in (("long_polling_s_max", "5"), ("send_hold_ms_max", "500"), ("log_level", "DEBUG")):
        assert run("config", "set", k, v, *ep).exit_code == 0, k
    doc = json.loads(run("config", "show", "--json", *ep).output)
    assert doc["store"]["file_reserved_time_hours"] == 1.5 and doc["store"]["disk_used_space_percent_max"] == 60
    assert (doc["broker"]["long_polling_s_max"], doc["broker"]["send_hold_ms_max"], doc["broker"]["log_level"]) == \
        (5.0, 500, "DEBUG")
    disk = json.loads(run("disk", "--json", *ep).output)
    assert {d["thresholds_percent"]["max_used"] for d in disk["directories"]} == {60}, "in effect in the disk checks"
