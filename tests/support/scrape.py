"""The broker's HTTP port from a test: a GET, and a Prometheus scrape parsed by prometheus-client."""

from __future__ import annotations

import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def get(port: int, path: str) -> tuple[int, str]:
    """(status, body) of GET http://127.0.0.1:port/path (an error status too)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape(port: int) -> dict:
    """{(name, labels as a sorted tuple): value} of one scrape, parsed by prometheus-client."""
    code, text = get(port, "/metrics")
    assert code == 200
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}
