"""The status page in a real headless Chromium while the broker's disk is past 85 %: the danger
is shown (the verdict at the top, the disk's bar, the forecast chart) in the rendered DOM and
in a screenshot."""

import os
import re

from tidemq.client import Producer

from tests.support import browser
from tests.support.brokers import SMALL, free_port
from tests.support.wait import wait_until

MIB = 1 << 20


def used_percent(path: str) -> float:
    st = os.statvfs(path)
    return 100.0 * (st.f_blocks - st.f_bfree) / st.f_blocks


def test_page_shows_the_danger_of_a_disk_past_85_percent(env, can_mount, broker_factory, tmp_path):
    exe = browser.chromium_path()
    root = env.tmpfs("root", 64)
    settings = {**SMALL, "TIDEMQ_ALARM_CHECK_INTERVAL_MS_MAX": "200", "TIDEMQ_STATUS_SAMPLE_INTERVAL_S": "0.2"}
    b = broker_factory(root, env=settings, args=["--auto-create-topics", "--metrics-port", str(free_port())])
    try:
        url = f"http://127.0.0.1:{b.metrics_port}/"
        with Producer(b.endpoint) as p:
            assert all(r.ok for r in p.send_batch("filling", [b"x" * 1024] * 200))
        page = browser.dom(exe, url)
        assert 'id="verdict" class="accepted"' in page
        # past 85 %: what a growing backlog does to a small disk, done at once with a ballast file
        with open(os.path.join(root, "ballast"), "wb") as f:
            while used_percent(root) < 88.0:
                f.write(b"\0" * MIB)
        page = wait_until(lambda: (lambda d: d if 'class="accepted"' not in d and "disk danger" in d else None)(
            browser.dom(exe, url)), "the page to show the full disk")
        verdict = re.search(r'<div id="verdict" class="(\w+)">(.*?)</div>', page, re.S)
        assert verdict.group(1) in ("held", "refused") and "DISK" in verdict.group(2)
        assert re.search(r'<tr class="disk danger" data-used="(8[5-9]|9\d)\.', page)
        assert '<svg id="chart"' in page and 'id="usage"' in page
        shot = str(tmp_path / "status-page.png")
        browser.screenshot(exe, url, shot)
        with open(shot, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(shot) > 10_000
    finally:
        b.stop()
