"""A fast Python client for tidemq on the RocketMQ 5 gRPC protocol.

    from tidemq.client import Producer, PullConsumer
    p = Producer("127.0.0.1:8081")
    results = p.send_batch("Orders", [b"a", b"b"], tags="T")      # one request, one store batch
    assert results.all_ok(), results.failed()                       # SendResults: one SendResult each
    c = PullConsumer("127.0.0.1:8081", group="etl")
    r = c.pull("Orders", queue_id=0, offset=0, batch_size=256)     # r.messages, r.next_offset
    g = PopConsumer("127.0.0.1:8081", group="billing")
    msgs = g.receive("Orders", batch_size=16); g.ack("Orders", msgs) # pop, then ack when done

Unlike the official client (one message per SendMessage), a batch travels in
one request and is stored with one put: by default a compact frame through
``/tidemq.Data/SendRecords`` (NORMAL messages; ``Producer(raw=False)`` uses the
protocol's SendMessage), and ``send_batches`` keeps several requests in flight.
``PullConsumer.pull_records`` reads records as stored, decoded here, and
``PullConsumer.iter_records`` reads a stretch of a queue with the next pulls
already under way while the caller works on a response. Both sign
their calls with ``access_key`` / ``secret_key`` and speak TLS with
``root_certificates`` (or ``tls=True``). Channels are created on first use, so
objects can be made before a fork (Spark workers) and used after it.
"""

from .client import ClientError, PopConsumer, Producer, PullConsumer, PullResult, RecordsResult
from .results import SendResult, SendResults

__all__ = ["Producer", "PullConsumer", "PopConsumer", "PullResult", "RecordsResult", "SendResult", "SendResults",
           "ClientError"]
