"""The gRPC front end: apache.rocketmq.v2.MessagingService over a MessageStore.

    server.py      Broker: starts the store, the server and the background tasks; stops them
    service.py     MessagingService: each RPC handed to the part below that serves it
    admin.py       the admin service (tidemq.Admin)
    wire.py        a message between the wire and the store, both directions
    produce/       sends: SendMessage, SendRecords, what both go through, the dedup window
    consume/       pop consumption (receive, ack, invisible time, auto-renew) and offset reads
    deferred/      DELAY and TRANSACTION messages, parked in system topics until due / decided
    protection/    resource alarms, flow control of sends, authentication
    sessions/      which clients are alive; their Telemetry streams
    state/         where the broker's own durable state lives under the store root; its journal

What the broker and its clients both speak (stubs, signing, frames, admin shapes) is
tidemq.protocol.
"""
