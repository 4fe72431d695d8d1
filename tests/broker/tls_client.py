"""Child process of test_tls_e2e: the official client with tls_enable=True against a TLS broker.

The official client uses grpc.ssl_channel_credentials() with the default roots, so the test's
self-signed certificate is trusted through GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, set by the parent
(gRPC reads it once per process: hence a process of its own). Prints one JSON line.
"""

import json
import sys


def main(endpoint: str, topic: str) -> None:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer
    conf = ClientConfiguration(endpoint, Credentials("tidemq-ak", "s3cret-sk"), request_timeout=30)
    p = Producer(conf, (topic,), tls_enable=True)
    p.startup()
    c = SimpleConsumer(conf, "tls-group", {topic: FilterExpression("*")}, await_duration=1, tls_enable=True)
    c.startup()
    try:
        sent = []
        for i in range(3):
            m = Message()
            m.topic = topic
            m.body = b"over-tls-%d" % i
            sent.append(p.send(m).message_id)
        got = []
        for _ in range(20):
            got += c.receive(8, 30)
            if len(got) >= 3:
                break
        for m in got:
            c.ack(m)
        print(json.dumps({"sent": sent, "received": [m.message_id for m in got],
                          "bodies": sorted(m.body.decode() for m in got)}), flush=True)
    finally:
        c.shutdown()
        p.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
