"""Spark tests: a topic filled through a broker with the fast client, and DataFrame rows in an
order that compares (the SparkSession and broker fixtures are in tests/spark/conftest.py)."""


def fill_through_broker(endpoint, topic="Orders", batches=4, per=250):
    """Send ``batches`` x ``per`` messages (bodies, tags, keys, properties varied by position);
    the number sent."""
    from tidemq.client import Producer
    with Producer(endpoint) as p:
        for b in range(batches):
            n0 = b * per
            p.send_batch(topic, [b"order-%d" % (n0 + i) * (1 + i % 5) for i in range(per)],
                         tags=[f"t{i % 3}" if i % 4 else None for i in range(per)],
                         keys=[[f"k{n0 + i}", "x"] if i % 2 else [] for i in range(per)],
                         properties=[{"n": str(n0 + i), "note": "ünï ✓"} if i % 3 else {} for i in range(per)])
    return batches * per


def rows_by_position(df):
    """Rows as comparable dicts ordered by (topic, queue, offset); maps as sorted item lists."""
    out = []
    for r in df.collect():
        d = r.asDict()
        d["properties"] = sorted((d["properties"] or {}).items())
        out.append(d)
    return sorted(out, key=lambda d: (d["topic"], d["queue_id"], d["queue_offset"]))
