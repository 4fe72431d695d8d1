"""A real Prometheus (and its promtool) from Debian's ``prometheus`` package, for the tests of
deploy/prometheus/: the alert rules checked and unit-tested by promtool, and a server that scrapes
a real broker and answers through its query API.

``ensure_installed()`` installs the package with apt-get when it is missing (CI machines start
fresh; tests run as root); where it cannot be installed the tests that need it are skipped with
the reason printed. ``PrometheusServer`` runs one on a free loopback port with its data in a
scratch directory, and stops it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request

import pytest

from . import apt
from .brokers import REPO, free_port
from .wait import wait_until

RULES_DIR = os.path.join(REPO, "deploy", "prometheus")
RULES = os.path.join(RULES_DIR, "tidemq-rules.yml")
RULES_TEST = os.path.join(RULES_DIR, "tidemq-rules.test.yml")


def ensure_installed() -> str | None:
    """None when prometheus and promtool can run here, installing the Debian package if needed;
    else why not."""
    return apt.install("prometheus", lambda: bool(shutil.which("prometheus") and shutil.which("promtool")),
                       update=True)


def require() -> None:
    why = ensure_installed()
    if why is not None:
        print(f"SKIPPED: {why}")
        pytest.skip(why)


def promtool(*args: str, cwd: str = RULES_DIR) -> subprocess.CompletedProcess:
    return subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


class PrometheusServer:
    """``prometheus`` scraping ``jobs`` ({job name: (targets, bearer token or None)}) every second,
    with the tidemq rules loaded."""

    def __init__(self, jobs: dict[str, tuple[list[str], str | None]]) -> None:
        self.dir = tempfile.mkdtemp(prefix="tidemq-prom-")
        self.port = free_port()
        scrape = []
        for name, (targets, token) in jobs.items():
            job = {"job_name": name, "scrape_interval": "1s", "scrape_timeout": "1s",
                   "static_configs": [{"targets": targets}]}
            if token is not None:
                path = os.path.join(self.dir, f"{name}.token")
                with open(path, "w") as fh:
                    fh.write(token)
                job["authorization"] = {"type": "Bearer", "credentials_file": path}
            scrape.append(job)
        shutil.copy(RULES, os.path.join(self.dir, "tidemq-rules.yml"))
        # JSON is YAML: no YAML writer needed
        cfg = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
               "rule_files": ["tidemq-rules.yml"], "scrape_configs": scrape}
        conf = os.path.join(self.dir, "prometheus.yml")
        with open(conf, "w") as fh:
            json.dump(cfg, fh)
        self.log = open(os.path.join(self.dir, "prometheus.log"), "w")
        self.proc = subprocess.Popen(["prometheus", f"--config.file={conf}",
                                      f"--storage.tsdb.path={self.dir}/data",
                                      f"--web.listen-address=127.0.0.1:{self.port}"],
                                     stdout=self.log, stderr=subprocess.STDOUT, cwd=self.dir)
        try:
            wait_until(lambda: self.proc.poll() is not None or self._get("/-/ready")[0] == 200,
                       "Prometheus to be ready")
        except AssertionError:
            self.stop()
            raise
        if self.proc.poll() is not None:
            out = self.output()
            self.stop()
            raise AssertionError(f"Prometheus exited: {out[-2000:]}")

    def output(self) -> str:
        self.log.flush()
        with open(os.path.join(self.dir, "prometheus.log")) as fh:
            return fh.read()

    def _get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError:
            return 0, ""

    def api(self, path: str, **params) -> dict:
        """The ``data`` of a successful answer of the HTTP API (/api/v1/...)."""
        code, body = self._get(f"/api/v1/{path}" + (f"?{urllib.parse.urlencode(params)}" if params else ""))
        assert code == 200, (code, body)
        doc = json.loads(body)
        assert doc["status"] == "success", doc
        return doc["data"]

    def query(self, expr: str) -> list[dict]:
        """The instant vector of ``expr``: [{"metric": {...}, "value": [t, "v"]}, ...]."""
        return self.api("query", query=expr)["result"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
