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


def make_ca_and_certificates(directory: str, names=("member", "client")) -> dict[str, tuple[str, str]]:
    """A CA and certificates it signs, made with the openssl command as docs/security.md shows:
    {"ca": (ca.pem, ca-key.pem), name: (name.pem, name-key.pem)}; each certificate for 127.0.0.1 and
    localhost (IP and DNS SANs), for servers and clients alike (extendedKeyUsage serverAuth, clientAuth)."""
    import os

    def run(*args):
        r = subprocess.run(list(args), capture_output=True, text=True, timeout=60, cwd=directory)
        assert r.returncode == 0, r.stderr

    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", "ca-key.pem", "-out", "ca.pem", "-days", "2", "-subj", "/CN=tidemq test CA",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    out = {"ca": (os.path.join(directory, "ca.pem"), os.path.join(directory, "ca-key.pem"))}
    ext = os.path.join(directory, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n"
                "keyUsage=critical,digitalSignature\nbasicConstraints=CA:FALSE\n")
    for name in names:
        run("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", f"{name}-key.pem", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        run("openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem",
            "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", "-extfile", "ext.cnf")
        out[name] = (os.path.join(directory, f"{name}.pem"), os.path.join(directory, f"{name}-key.pem"))
    return out


@pytest.fixture
def ca_certificates(tmp_path):
    """make_ca_and_certificates in tmp_path/certs: a CA, "member" and "client" certificates it signed."""
    d = tmp_path / "certs"
    d.mkdir()
    return make_ca_and_certificates(str(d))
