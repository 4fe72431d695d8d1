"""What the send handlers ask of a grpc.aio servicer context, for tests that call them in process
(tests/broker/produce): a loopback peer, a client id, a generous deadline; the trailer kept."""


class SendContext:
    def __init__(self, peer: str = "ipv4:127.0.0.1:1", client_id: str = "c1") -> None:
        self._peer = peer
        self._client_id = client_id
        self.trailer = ()

    def peer(self) -> str:
        return self._peer

    def invocation_metadata(self):
        return (("x-mq-client-id", self._client_id),)

    def time_remaining(self) -> float:
        return 10.0

    def set_trailing_metadata(self, md) -> None:
        self.trailer = tuple(md)
