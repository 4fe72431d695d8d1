"""Authentication and TLS in tests: the broker env with an access key and secret, and a
self-signed certificate for 127.0.0.1 made with the openssl command."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from .brokers import SMALL

AUTH = {**SMALL, "TIDEMQ_ACCESS_KEY": "tidemq-ak", "TIDEMQ_SECRET_KEY": "s3cret-sk"}


@pytest.fixture
def certificate(tmp_path):
    """(cert.pem, key.pem) paths of a self-signed certificate for 127.0.0.1 / localhost."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    key, cert = str(tmp_path / "key.pem"), str(tmp_path / "cert.pem")
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return cert, key
