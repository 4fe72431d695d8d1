"""TLS end to end with a self-signed certificate the test makes (openssl CLI): the official client
with tls_enable=True sends, receives and acks (with authentication on too); a plaintext client is
not served, and a TLS client that does not trust the certificate is refused."""

import json
import os
import subprocess
import sys

import grpc
import pytest

from tidemq.protocol.stubs import Code, pb, sgrpc, spb



from ..support.auth import AUTH
from ..support.brokers import CLIENT_HOME, REPO, make_topic


def test_official_client_over_tls(tmp_path, broker_factory, certificate):
    cert, key = certificate
    root = str(tmp_path / "store")
    make_topic(root, "Tls", 2)
    b = broker_factory(root, env={**AUTH, "TIDEMQ_TLS_CERT_FILE": cert, "TIDEMQ_TLS_KEY_FILE": key})

    child = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "tls_client.py"), b.endpoint,
                            "Tls"], capture_output=True, text=True, timeout=240, cwd=REPO,
                           env=dict(os.environ, HOME=CLIENT_HOME, GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=cert))
    assert child.returncode == 0, child.stderr[-3000:]
    out = json.loads(child.stdout.strip().splitlines()[-1])
    assert sorted(out["received"]) == sorted(out["sent"]) and len(out["sent"]) == 3
    assert out["bodies"] == ["over-tls-0", "over-tls-1", "over-tls-2"]

    route = spb.QueryRouteRequest(topic=pb.Resource(name="Tls"))
    import time

    from tidemq.protocol.signing import date_time, signed_metadata
    md = signed_metadata("tidemq-ak", "s3cret-sk", date_time(time.time()))
    with open(cert, "rb") as f:
        trusted = grpc.ssl_channel_credentials(root_certificates=f.read())
    with grpc.secure_channel(b.endpoint, trusted) as ch:
        assert sgrpc.MessagingServiceStub(ch).QueryRoute(route, metadata=md, timeout=30).status.code == Code.OK
    with grpc.insecure_channel(b.endpoint) as ch:           # plaintext: no gRPC answer at all
        with pytest.raises(grpc.RpcError) as e:
            sgrpc.MessagingServiceStub(ch).QueryRoute(route, metadata=md, timeout=3)
        assert e.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    untrusted = grpc.ssl_channel_credentials(root_certificates=open(os.path.join(
        os.path.dirname(grpc.__file__), "_cython", "_credentials", "roots.pem"), "rb").read())
    with grpc.secure_channel(b.endpoint, untrusted) as ch:  # the certificate is not trusted: refused
        with pytest.raises(grpc.RpcError) as e:
            sgrpc.MessagingServiceStub(ch).QueryRoute(route, metadata=md, timeout=3)
        assert e.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def test_client_certificates_required_by_tls_client_ca_file(tmp_path, broker_factory, ca_certificates):
    """With tls_client_ca_file, a client must show a certificate that CA signed: one without is refused
    at the handshake, one with is served; the CA of the group's certificates is what clients trust."""
    from tidemq.client import admin
    from tidemq.client.settings import TlsOptions

    ca, _ = ca_certificates["ca"]
    cert, key = ca_certificates["member"]
    b = broker_factory(env={**AUTH, "TIDEMQ_TLS_CERT_FILE": cert, "TIDEMQ_TLS_KEY_FILE": key,
                            "TIDEMQ_TLS_CA_FILE": ca, "TIDEMQ_TLS_CLIENT_CA_FILE": ca})
    import time

    from tidemq.protocol.signing import date_time, signed_metadata
    md = signed_metadata("tidemq-ak", "s3cret-sk", date_time(time.time()))
    roots = open(ca, "rb").read()
    with pytest.raises(grpc.RpcError) as e:
        admin.call(b.endpoint, "Status", metadata=md, timeout_s=10, tls=TlsOptions(roots))
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE, "no client certificate: the handshake fails"
    ccert, ckey = ca_certificates["client"]
    mine = TlsOptions(roots, open(ccert, "rb").read(), open(ckey, "rb").read())
    assert admin.call(b.endpoint, "Status", metadata=md, timeout_s=60, tls=mine)["ok"]
