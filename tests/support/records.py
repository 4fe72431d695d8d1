"""Records laid out as the commit log stores them, with varied properties (tags, keys, UNIQ_KEY,
non-ASCII values, an empty body): what the Spark decoder's tests read."""

from tidemq.record import codec

HOST = codec.encode_host("127.0.0.1:10911")


def record(i, props, body=None, topic=b"Orders"):
    return codec.encode_record(body=body if body is not None else b"body-%d" % i * (1 + i % 7), topic=topic,
                               properties=codec.encode_properties(props), queue_id=i % 3, queue_offset=i,
                               physical_offset=1000 + i * 300, born_timestamp_ms=1_700_000_000_000 + i,
                               born_host=codec.encode_host("10.0.0.1:4242"), store_timestamp_ms=1_700_000_000_500 + i,
                               store_host=HOST)


def varied(n):
    out = []
    for i in range(n):
        props = {}
        if i % 2:
            props["TAGS"] = f"t{i % 4}"
        if i % 3:
            props["KEYS"] = f"k{i} order-{i}"
        if i % 5:
            props["UNIQ_KEY"] = f"01{i:032X}"
        if i % 7 == 0:
            props["user"] = "ünïcode ✓ %d" % i
        out.append(record(i, props, body=b"" if i == 11 else None))
    return out
