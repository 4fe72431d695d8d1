"""df.write.format("tidemq"): rows sent in batches, read back; a retried task stores nothing twice."""

import os

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

from tidemq.spark.backend import Refused
from tidemq.spark.sink import TidemqWriter

from ..support.spark import fill_through_broker

pytestmark = pytest.mark.timeout(900)


def read(spark, endpoint, topic):
    return spark.read.format("tidemq").option("endpoints", endpoint).option("topic", topic).load()


def test_rows_are_sent_and_read_back(spark, broker):
    b = broker()
    rows = [(f"hello {i}", f"t{i % 2}", [f"k{i}"], {"n": str(i)}) for i in range(300)]
    df = spark.createDataFrame(rows, "body string, tags string, keys array<string>, properties map<string,string>")
    df.write.format("tidemq").option("endpoints", b.endpoint).option("topic", "Out").option("batchSize", "64") \
        .mode("append").save()
    got = read(spark, b.endpoint, "Out").collect()
    assert len(got) == 300
    by_body = {r.body.decode(): r for r in got}
    r7 = by_body["hello 7"]
    assert r7.tags == "t1" and r7.keys == ["k7"] and r7.properties["n"] == "7"


def test_a_topic_column_routes_rows(spark, broker):
    b = broker()
    df = spark.createDataFrame([(f"A{i}" if i % 2 else f"B{i}", b"x%d" % i) for i in range(40)], "topic string, body binary")
    df.write.format("tidemq").option("endpoints", b.endpoint).mode("append").save()
    assert read(spark, b.endpoint, "A1").count() == 1 and read(spark, b.endpoint, "B0").count() == 1


def test_a_failed_task_retried_stores_nothing_twice(spark, broker, tmp_path):
    b = broker()
    marker = str(tmp_path / "failed-once")
    n = 600

    @F.udf(LongType())
    def fail_once_at_the_end(i):
        if i == n - 1 and not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("injected task failure after most rows were sent")
        return i

    old = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "50")     # rows go out before the failure
    try:
        df = spark.range(n).coalesce(1).select(fail_once_at_the_end("id").alias("id")) \
            .select(F.format_string("m%d", "id").alias("body"))
        df.write.format("tidemq").option("endpoints", b.endpoint).option("topic", "Retried") \
            .option("batchSize", "50").mode("append").save()
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", old)
    assert os.path.exists(marker), "the injected failure did not happen"
    got = read(spark, b.endpoint, "Retried").select("body").collect()
    assert sorted(r.body for r in got) == sorted(b"m%d" % i for i in range(n))


def test_a_refused_send_fails_the_write_clearly(spark, broker):
    b = broker(args=())                                # no auto-creation: the topic does not exist
    df = spark.createDataFrame([("x",)], "body string")
    with pytest.raises(Exception, match="refused.*does not exist"):
        df.write.format("tidemq").option("endpoints", b.endpoint).option("topic", "Missing").mode("append").save()


def test_a_stream_from_one_topic_to_another_copies_each_message_once(spark, broker, tmp_path):
    b = broker()
    fill_through_broker(b.endpoint, topic="In", batches=1, per=200)
    ck = str(tmp_path / "checkpoint")

    def copy():
        q = (spark.readStream.format("tidemq").option("endpoints", b.endpoint).option("topic", "In")
             .option("startingOffsets", "earliest").load()
             .selectExpr("body", "tags", "keys", "msg_id")
             .writeStream.format("tidemq").option("endpoints", b.endpoint).option("topic", "Copy")
             .option("checkpointLocation", ck).trigger(availableNow=True).start())
        assert q.awaitTermination(600) and q.exception() is None

    copy()
    fill_through_broker(b.endpoint, topic="In", batches=1, per=100)
    copy()                                                  # restarted from its checkpoint
    copied = read(spark, b.endpoint, "Copy").select("body", "msg_id").collect()
    original = read(spark, b.endpoint, "In").select("body", "msg_id").collect()
    assert sorted((r.body, r.msg_id) for r in copied) == sorted((r.body, r.msg_id) for r in original)


def _sink_refusal(endpoints: list[str], **options) -> str:
    """The Refused that a write of one row through the sink (its tasks' code, no Spark needed) raises
    with these options, from the first member's first answer: the option named, and no other member
    tried (failovers 0) though both endpoints are named and timeoutSeconds (120) would allow many
    more tries."""
    w = TidemqWriter({"endpoints": ",".join(endpoints), "topic": "T", "timeoutSeconds": "120", **options}, None)
    with pytest.raises(Refused) as e:
        w.write(iter([pa.RecordBatch.from_pylist([{"body": b"x"}])]))
    assert w.sender.failovers == 0 and not e.value.unreachable
    return e.value.option


def test_an_untrusted_certificate_or_tls_on_one_side_only_fails_the_write_at_once(broker, certificate, tmp_path):
    """As the readers (test_backend.py): a certificate the sink does not trust, a TLS port reached in
    plaintext and a plaintext port reached with TLS are refusals, not members that do not answer:
    the one-line error naming the option to change, at once, not after timeoutSeconds of sends to
    the next member. With the CA (rootCertificates) the same broker stores the row."""
    cert, key = certificate
    tls = broker(env={"TIDEMQ_TLS_CERT_FILE": cert, "TIDEMQ_TLS_KEY_FILE": key}).endpoint
    plain = broker(root=str(tmp_path / "plain")).endpoint
    assert _sink_refusal([tls, tls], tls="true") == "rootCertificates"       # system roots: not its CA
    assert _sink_refusal([tls, tls]) == "tls"                                # plaintext to a TLS port
    assert _sink_refusal([plain, plain], rootCertificates=cert) == "tls"    # TLS to a plaintext port
    w = TidemqWriter({"endpoints": tls, "topic": "T", "rootCertificates": cert, "timeoutSeconds": "120"}, None)
    sent = w.write(iter([pa.RecordBatch.from_pylist([{"body": b"x"}])]))
    assert sent.messages == 1 and sent.duplicates == 0 and w.sender.failovers == 0
