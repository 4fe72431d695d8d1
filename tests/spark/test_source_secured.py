"""spark.read.format("tidemq") from a secured broker (keys, users and ACLs, TLS): both readers sign
and speak TLS themselves, and every misconfiguration is one line naming the option to change.
(Apart from test_source.py so that the suite's two workers share the Spark time.)"""

import json
import time

import pytest

from ..support.auth import AUTH
from .test_source import load

pytestmark = [pytest.mark.timeout(900), pytest.mark.usefixtures("reader")]


def _user(b, name, secret, *grants):
    """A user made on the running broker (signed by its super user), with ``grants``: (resource, actions)."""
    from tidemq.client import admin
    from tidemq.protocol.signing import date_time, signed_metadata

    def call(method, req):
        got = admin.call(b.endpoint, method, req, timeout_s=60.0, root_certificates=b.cert,
                         metadata=signed_metadata("tidemq-ak", "s3cret-sk", date_time(time.time())))
        assert got["ok"], got
    call("CreateUser", {"name": name, "secret_key": secret})
    for resource, actions in grants:
        call("Grant", {"user": name, "resource": resource, "actions": actions})


def test_a_broker_that_wants_signed_calls_over_tls(spark, broker, certificate, reader):
    """The keys and the broker's certificate as options: the sink writes and both readers read
    back (the JVM reader signs and speaks TLS itself); a user with sub on the topic reads, one
    without is told which permission it lacks; without the keys, with wrong keys, or without the
    CA, one line names the option to change."""
    cert, key = certificate
    b = broker(env={**AUTH, "TIDEMQ_TLS_CERT_FILE": cert, "TIDEMQ_TLS_KEY_FILE": key})
    b.cert = cert
    conn = {"accessKey": "tidemq-ak", "secretKey": "s3cret-sk", "rootCertificates": cert}
    bodies = [b"secure-%d" % i for i in range(40)]
    spark.createDataFrame([(x,) for x in bodies], "body binary").write.format("tidemq") \
        .option("endpoints", b.endpoint).option("topic", "Secure").options(**conn).mode("append").save()
    df = load(spark, endpoints=b.endpoint, topic="Secure", **conn)
    assert sorted(r.body for r in df.select("body").collect()) == sorted(bodies)
    assert "s3cret-sk" not in df._jdf.queryExecution().toString()        # Spark redacts it in plans
    _user(b, "reader-1", "reader-secret", ("topic:Secure", ["sub"]))
    _user(b, "nosub-1", "nosub-secret", ("topic:Other", ["sub"]))
    as_reader = {"accessKey": "reader-1", "secretKey": "reader-secret", "rootCertificates": cert}
    got = load(spark, endpoints=b.endpoint, topic="Secure", **as_reader)
    assert sorted(r.body for r in got.select("body").collect()) == sorted(bodies)
    with pytest.raises(Exception, match="FORBIDDEN.*needs the permission sub on the topic"):
        load(spark, endpoints=b.endpoint, topic="Secure", accessKey="nosub-1", secretKey="nosub-secret",
             rootCertificates=cert).count()
    with pytest.raises(Exception, match="UNAUTHORIZED.*check the options accessKey and secretKey"):
        load(spark, endpoints=b.endpoint, topic="Secure", rootCertificates=cert).count()
    with pytest.raises(Exception, match="UNAUTHORIZED.*check the options accessKey and secretKey"):
        load(spark, endpoints=b.endpoint, topic="Secure", accessKey="reader-1", secretKey="wrong",
             rootCertificates=cert).count()
    # a certificate not trusted and plaintext to a TLS port are refusals, said at once: not a member
    # that did not answer, retried until timeoutSeconds (test_backend.py: the Refused, no other try)
    with pytest.raises(Exception, match="could not be verified.*give the option rootCertificates") as e:
        load(spark, endpoints=b.endpoint, topic="Secure", accessKey="reader-1", secretKey="reader-secret",
             tls="true").count()
    assert "no member answered" not in str(e.value)
    with pytest.raises(Exception, match="speaks TLS: set the option tls=true") as e:
        load(spark, endpoints=b.endpoint, topic="Secure", accessKey="reader-1", secretKey="reader-secret").count()
    assert "no member answered" not in str(e.value)
    with pytest.raises(Exception, match="both options accessKey and secretKey"):
        load(spark, endpoints=b.endpoint, topic="Secure", accessKey="tidemq-ak", rootCertificates=cert).count()
    if reader == "jvm":
        # the executors' side (PullRecords, signed, over TLS) on its own: a partition as planned, read
        # with each user's keys; the one without sub gets the refusal naming the permission
        from tidemq.spark import planner
        opts = {"endpoints": b.endpoint, "topic": "Secure", **as_reader}
        part = planner.handle(json.dumps({"op": "batch", "options": opts}).encode())
        assert part["ok"], part
        part = part["partitions"][0]
        assert part["source"]["endpoints"] == [b.endpoint] and part["source"]["rootCertificates"] == cert
        read = spark._jvm.org.tidemq.spark.ReadOne
        assert len(read.queueOffsets(json.dumps(part))) == part["end"] - part["start"]
        denied = {**part, "source": {**part["source"], "accessKey": "nosub-1", "secretKey": "nosub-secret"}}
        with pytest.raises(Exception, match="FORBIDDEN: reading Secure needs the permission sub on topic Secure"):
            read.queueOffsets(json.dumps(denied))
        untrusted = {**part, "source": {**part["source"], "rootCertificates": None, "tls": True}}
        with pytest.raises(Exception, match="could not be verified.*give the option rootCertificates"):
            read.queueOffsets(json.dumps(untrusted))
