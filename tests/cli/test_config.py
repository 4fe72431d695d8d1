"""tidemq.cli.config: `tidemq config show` (every setting, those changeable at run time marked) and
`config set` (a run-time setting until restart; others refused) against a real broker."""

import json

from ..support.cli import run


def test_config_show_marks_run_time_settings_and_set_changes_one(broker):
    ep = ("--endpoint", broker.endpoint)
    doc = json.loads(run("config", "show", "--json", *ep).output)
    assert doc["store"]["root_dir"] == broker.root and doc["broker"]["metrics_port"] == 0
    assert set(doc["changeable_at_run_time"]) == {"memory_high_watermark_bytes", "memory_high_watermark_ratio",
                                                  "disk_free_limit_bytes"}
    shown = run("config", "show", *ep).output
    marked = {line.split("│")[2].strip() for line in shown.splitlines()
              if line.count("│") >= 5 and "config set (until restart)" in line}
    assert marked == set(doc["changeable_at_run_time"]), shown
    assert "changeable at run time, until the broker restarts" in shown
    r = run("config", "set", "disk_free_limit_bytes", 12345, *ep)
    assert r.exit_code == 0 and "until it restarts" in r.output
    assert json.loads(run("alarms", "--json", *ep).output)["disk"]["limit_bytes"] == 12345
    r = run("config", "set", "segment_size_bytes", 1, *ep)
    assert r.exit_code == 1 and "cannot change at run time" in r.output
