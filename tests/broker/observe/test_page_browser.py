"""The status page in a real headless Chromium (Debian's chromium, --headless --no-sandbox,
loopback only) while a broker's 64 MiB disk fills: first towards 85 % (accepted, the forecast
draws a line to each ratio still ahead), then past it (the disk alarm holds sends: the verdict
at the top, the alarm raised, the disk's bar in danger, "writes held now" on the chart), with a
topic and a consumer group with lag and messages in flight. The rendered DOM is checked and a
screenshot written; with STATUS_PAGE_SCREENSHOT=<path> it is also copied there (what
scripts/status-page-screenshot does for docs/status-page.png)."""

import os
import re
import shutil
import time

from tidemq.client import PopConsumer, Producer
from tidemq.protocol.stubs import Code

from tests.support import browser
from tests.support.brokers import SMALL, free_port
from tests.support.wait import wait_until

MIB = 1 << 20
SCREENSHOT_TO = "STATUS_PAGE_SCREENSHOT"


def used_percent(path: str) -> float:
    st = os.statvfs(path)
    return 100.0 * (st.f_blocks - st.f_bfree) / st.f_blocks


def fill_slowly(path: str, percent: float, step_s: float = 0.3) -> None:
    """Grow a ballast file a MiB at a time to ``percent``: a disk filling at a steady pace (the
    pauses shape the chart; nothing is asserted about time)."""
    with open(os.path.join(path, "ballast"), "ab") as f:
        while used_percent(path) < percent:
            f.write(b"\0" * MIB)
            f.flush()
            os.fsync(f.fileno())
            time.sleep(step_s)


def page_when(exe: str, url: str, cond, what: str) -> str:
    return wait_until(lambda: (lambda d: d if cond(d) else None)(browser.dom(exe, url)), what)


def test_page_shows_the_forecast_then_the_danger_of_a_disk_past_85_percent(env, can_mount, broker_factory,
                                                                         tmp_path):
    exe = browser.chromium_path()
    root = env.tmpfs("root", 64)
    settings = {**SMALL, "TIDEMQ_CONSUME_QUEUE_UNITS_PER_SEGMENT": "1000", "TIDEMQ_CLEAN_RESOURCE_INTERVAL_MS": "200",
                "TIDEMQ_ALARM_CHECK_INTERVAL_MS_MAX": "200", "TIDEMQ_STATUS_SAMPLE_INTERVAL_S": "0.2"}
    b = broker_factory(root, env=settings, args=["--auto-create-topics", "--metrics-port", str(free_port())])
    try:
        url = f"http://127.0.0.1:{b.metrics_port}/"
        with Producer(b.endpoint) as p:
            assert all(r.ok for r in p.send_batch("orders", [b"order %d" % i + b"." * 1000 for i in range(300)]))
        with PopConsumer(b.endpoint, "billing") as c:          # a group behind: lag, and messages in flight
            taken = c.receive("orders", batch_size=60)
            assert len(taken) == 60 and c.ack("orders", taken[:50]) == [Code.OK] * 50
        page = browser.dom(exe, url)
        assert 'id="verdict" class="accepted"' in page
        assert re.search(r'<meta http-equiv="refresh" content="\d+">', page), "the page refreshes itself"
        topics = re.search(r'<table id="topics">(.*?)</table>', page, re.S).group(1)
        assert re.search(r"<td>orders</td><td>8</td><td>300</td><td>[\d.]+ KiB</td><td>0\.\.300</td>", topics), topics
        groups = re.search(r'<table id="groups">(.*?)</table>', page, re.S).group(1)
        assert "<td>billing</td><td>orders</td><td>250</td><td>10</td>" in groups, groups

        # towards 85 %: writes accepted, a forecast line (and its label) to each ratio ahead
        fill_slowly(root, 80.0)
        page = page_when(exe, url, lambda d: 'class="disk warn"' in d and d.count('<text class="forecast"') >= 2,
                         "the forecast lines to 85 and 90 %")
        assert 'id="verdict" class="accepted"' in page
        labels = re.findall(r'<text class="forecast"[^>]*>(\d+)% in ([^<]+)</text>', page)
        assert {r for r, _ in labels} >= {"85", "90"} and all(when != "now" for _, when in labels), labels
        assert len(re.findall(r'<line class="forecast"', page)) == len(labels)
        forecast = re.search(r'<p id="forecast">(.*?)</p>', page, re.S).group(1)
        assert re.search(r"85 % [\d.]+ (s|min|h)", forecast) and "the disks fill at" in forecast, forecast
        assert "something else fills them" in forecast, "a ballast file, not the log, fills this disk"
        browser.screenshot(exe, url, str(tmp_path / "status-page-forecast.png"), size="1100,1450")  # to look at

        # past 85 %: the disk alarm holds sends; every part of the page says so
        fill_slowly(root, 88.0, step_s=0.1)
        page = page_when(exe, url, lambda d: 'class="accepted"' not in d and "disk danger" in d
                         and 'id="stopped"' in d, "the page to show the full disk")
        verdict = re.search(r'<div id="verdict" class="(\w+)">(.*?)</div>', page, re.S)
        assert verdict.group(1) == "held" and "DISK_ALARM" in verdict.group(2), verdict.group(0)
        assert re.search(r'<tr class="disk danger" data-used="(8[5-9]|9\d)\.', page)
        alarms = re.search(r'<table id="alarms">(.*?)</table>', page, re.S).group(1)
        assert re.search(r"<td>disk</td><td>RAISED</td><td>disk alarm: free [\d.]+ MiB &lt; ", alarms), alarms
        assert re.search(r"<td>memory</td><td>clear</td>", alarms)
        assert '<svg id="chart"' in page and 'id="usage"' in page
        assert re.search(r'<text id="stopped"[^>]*>writes held now</text>', page)
        forecast = re.search(r'<p id="forecast">(.*?)</p>', page, re.S).group(1)
        assert "90 % now" in forecast and "sends are held now (disk alarm" in forecast, forecast
        assert re.search(r'<p id="cleanup">Last cleanup: nothing deleted since start</p>', page)
        assert "<td>billing</td>" in page and "<td>orders</td>" in page

        shot = str(tmp_path / "status-page.png")
        browser.screenshot(exe, url, shot, size="1100,1450")
        with open(shot, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(shot) > 10_000
        if os.environ.get(SCREENSHOT_TO):
            shutil.copyfile(shot, os.environ[SCREENSHOT_TO])
    finally:
        assert b.stop() == 0
