"""spark.readStream.format("tidemq"): availableNow into Parquet, restart from the checkpoint, rate limits."""

import pytest

from ..support.spark import fill_through_broker

pytestmark = [pytest.mark.timeout(900), pytest.mark.usefixtures("reader")]


def run_available_now(spark, endpoint, out, checkpoint, **options):
    r = spark.readStream.format("tidemq").option("endpoints", endpoint).option("topic", "S")
    for k, v in options.items():
        r = r.option(k, v)
    q = (r.load().writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(600), "the availableNow query did not finish"
    assert q.exception() is None
    return q


def test_a_restart_from_the_checkpoint_reads_only_new_messages_once(spark, broker, tmp_path):
    b = broker()
    fill_through_broker(b.endpoint, topic="S", batches=1, per=300)
    out, ck = tmp_path / "out", tmp_path / "checkpoint"
    run_available_now(spark, b.endpoint, out, ck, startingOffsets="earliest")
    first = spark.read.parquet(str(out))
    assert first.count() == 300
    fill_through_broker(b.endpoint, topic="S", batches=1, per=200)
    q = run_available_now(spark, b.endpoint, out, ck, startingOffsets="earliest")
    assert sum(p["numInputRows"] for p in q.recentProgress) == 200          # only the new ones were read
    both = spark.read.parquet(str(out))
    assert both.count() == 500 and both.select("msg_id").distinct().count() == 500
    assert both.select("topic", "queue_id", "queue_offset").distinct().count() == 500


def test_a_stream_starts_at_latest_by_default_and_respects_max_offsets_per_trigger(spark, broker, tmp_path):
    b = broker()
    fill_through_broker(b.endpoint, topic="S", batches=1, per=100)
    out, ck = tmp_path / "out", tmp_path / "checkpoint"
    run_available_now(spark, b.endpoint, out, ck)                           # latest: nothing yet
    fill_through_broker(b.endpoint, topic="S", batches=1, per=400)
    q = run_available_now(spark, b.endpoint, out, ck, maxOffsetsPerTrigger="120")
    rows = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(rows) == 400 and len(rows) >= 4 and max(rows) <= 120
    assert spark.read.parquet(str(out)).count() == 400
