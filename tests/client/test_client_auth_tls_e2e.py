"""tidemq.client with authentication and TLS: with the broker's access key and secret every call is
signed (raw sends and pulls, their streams, SendMessage, PullMessage, offsets); without them or with a wrong
secret it is refused UNAUTHORIZED; over TLS with the certificate as root it works, and a
plaintext client gets no answer."""

import grpc
import pytest

from tidemq.protocol.stubs import Code
from tidemq.client import ClientError, Producer, PullConsumer

from ..support.auth import AUTH
from ..support.brokers import make_topic

KEYS = {"access_key": "tidemq-ak", "secret_key": "s3cret-sk"}


def every_call(endpoint, topic, **kw):
    with Producer(endpoint, **kw) as p, Producer(endpoint, raw=False, **kw) as sm, \
            PullConsumer(endpoint, group="g", **kw) as c:
        assert p.queue_count(topic) == 1
        assert all(r.ok for r in p.send_batch(topic, [b"raw-1", b"raw-2"], tags="T"))
        assert all(r.ok for r in p.send_batches(topic, ([b"many-%d" % i] for i in range(3))))
        assert all(r.ok for r in sm.send_batch(topic, [b"send-message"]))
        bodies = [m.body for m in c.pull_records(topic, 0, 0).messages()]
        assert bodies == [b"raw-1", b"raw-2", b"many-0", b"many-1", b"many-2", b"send-message"]
        assert [m.body for m in c.pull(topic, 0, 0).messages] == bodies
        assert [m.body for r in c.iter_records(topic, 0, 0) for m in r.messages()] == bodies     # on its stream
        assert c.query_offset(topic, 0, "END") == 6
        c.commit(topic, 0, 6)
        assert c.committed(topic, 0) == 6


def test_signed_calls_and_refusals(tmp_path, broker_factory):
    root = str(tmp_path / "store")
    make_topic(root, "Secure", 1)
    b = broker_factory(root, env=AUTH)
    every_call(b.endpoint, "Secure", **KEYS)
    for kw in ({}, {"access_key": "tidemq-ak", "secret_key": "wrong"}):
        with Producer(b.endpoint, **kw) as p, PullConsumer(b.endpoint, **kw) as c:
            for call in (lambda: p.send_batch("Secure", [b"no"]), lambda: c.pull_records("Secure", 0, 0),
                         lambda: p.queue_count("Secure"), lambda: c.query_offset("Secure", 0),
                         lambda: p.send_batches("Secure", [[b"no"]] * 3), lambda: list(c.iter_records("Secure", 0, 0))):
                with pytest.raises(ClientError) as e:
                    call()
                assert e.value.code == Code.UNAUTHORIZED and "unauthorized" in str(e.value)
    with pytest.raises(ValueError):
        Producer(b.endpoint, access_key="only-one")


def test_tls(tmp_path, broker_factory, certificate):  # noqa: F811
    cert, key = certificate
    root = str(tmp_path / "store")
    make_topic(root, "Tls", 1)
    b = broker_factory(root, env={**AUTH, "TIDEMQ_TLS_CERT_FILE": cert, "TIDEMQ_TLS_KEY_FILE": key})
    every_call(b.endpoint, "Tls", root_certificates=cert, **KEYS)
    with open(cert, "rb") as fh:
        with Producer(b.endpoint, root_certificates=fh.read(), **KEYS) as p:     # the PEM's bytes do too
            assert p.send_batch("Tls", [b"x"])[0].ok
    with Producer(b.endpoint, timeout_s=2, **KEYS) as plain:                    # plaintext: no answer
        with pytest.raises(grpc.RpcError) as e:
            plain.send_batch("Tls", [b"x"])
        assert e.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
