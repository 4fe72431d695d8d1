"""What tidemq's two sides speak: the broker (tidemq.broker) and its clients (tidemq.client,
the CLI, the Spark source and sink). Nothing here imports either side or the store engine.

    stubs.py       the RocketMQ 5 gRPC stubs (apache.rocketmq.v2) and fast status-code names
    signing.py     the MQv2-HMAC-SHA1 request signature the clients compute and the broker checks
    data.py        tidemq's own methods next to MessagingService: names, and the SendMessage trailer
    send_frame.py  the frames of /tidemq.Data/SendRecords (a batch of one topic; per-message answers)
    pull_frame.py  the frames of /tidemq.Data/PullRecords (raw records of one queue by offset)
    admin.py       /tidemq.Admin: method names, JSON request / response shapes, and the caller

The byte layouts are written in each module's docstring and in docs/broker-protocol.md.
"""
