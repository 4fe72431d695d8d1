"""Many SendRecords frames on one call: ``/tidemq.Data/SendRecordsStream`` (protocol/data.py).

A unary SendRecords call per batch costs a call's set-up on both sides (~0.25 ms of the
broker's CPU and as much of the client's per batch here, and the wake-ups of the threads gRPC
hands a call between); on one stream, frames follow each other and answers come back in
order. ``FrameStream.run`` sends frames with at most ``window`` unanswered and hands each
answer to the caller with its frame's message ids.

The call has no deadline of its own (it lasts as long as the batches): a watchdog cancels it
when frames wait longer than ``timeout_s`` for their answer, and the caller gets
ClientError(REQUEST_TIMEOUT) (the outcome of those frames is unknown: resend them with their
message ids, which the broker's dedup window recognises). A broker that does not serve the
method (an older one) answers UNIMPLEMENTED before it reads anything: ``Unsupported`` gives
back the frames sent, for the caller to send as unary calls. A broker that refuses the caller
(unsigned, wrong key, no permission) answers one refusal frame at once, possibly before the
first frame was even taken: it is raised as the refusal's ClientError.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Callable, Iterator

import grpc

from ..protocol import data
from ..protocol.stubs import Code
from .errors import ClientError
from .watchdog import Watchdog

Frame = tuple[bytes, list]          # a SendRecords frame and its messages' ids


class Unsupported(Exception):
    """The broker does not serve SendRecordsStream; ``sent``: the frames taken for it (none
    answered), in order: the caller sends them another way, then the rest of its frames."""

    def __init__(self, sent: list[Frame]) -> None:
        super().__init__("the broker does not serve SendRecordsStream")
        self.sent = sent


class FrameStream:
    def __init__(self, channel, window: int, timeout_s: float) -> None:
        """``channel``: the client's _Channel (its ``stream`` callable and signature metadata)."""
        self.channel = channel
        self.window = max(1, window)
        self.timeout_s = timeout_s

    def run(self, frames: Iterator[Frame], on_answer: Callable[[bytes, list], None]) -> None:
        """Send every frame of ``frames``; ``on_answer(answer, ids)`` for each, in order."""
        room = threading.Semaphore(self.window)
        pending: deque[Frame] = deque()              # taken from ``frames``, not answered yet (oldest first)
        stop = threading.Event()
        taking = threading.Lock()                     # held while a frame is taken and put in ``pending``
        failure: list[BaseException] = []             # raised by ``frames`` (the caller's batches)
        watch = Watchdog(self.timeout_s)
        source = iter(frames)

        def requests():
            try:
                while True:
                    while not room.acquire(timeout=0.2):
                        if stop.is_set():
                            return
                    with taking:                      # a frame taken is in pending: none is lost on a stop
                        if stop.is_set():
                            return
                        frame = next(source, None)
                        if frame is None:
                            return
                        pending.append(frame)
                    watch.waiting()                # an answer is awaited (since the oldest was sent)
                    yield frame[0]
            except Exception as e:  # noqa: BLE001 - the caller's iterator failed: the caller gets it
                failure.append(e)

        watch.call = call = self.channel.stream(data.SEND_RECORDS_STREAM_PATH)(requests(),
                                                                              metadata=self.channel.metadata())
        answered = 0
        try:
            for answer in call:
                if not pending:               # answered before a frame was taken: the call itself was refused
                    on_answer(answer, [])     # raises the refusal's ClientError
                    raise ClientError(Code.INTERNAL_SERVER_ERROR,
                                      "the broker answered SendRecordsStream before any frame was sent")
                _frame, ids = pending.popleft()
                watch.got(more=bool(pending))
                room.release()
                answered += 1
                on_answer(answer, ids)
        except grpc.RpcError as e:
            if watch.fired:
                raise ClientError(Code.REQUEST_TIMEOUT,
                                  f"no answer within timeout_s={self.timeout_s} to {len(pending)} batch(es) sent on "
                                  f"SendRecordsStream: their outcome is unknown (resend them with the same message "
                                  f"ids)") from None
            if failure:
                raise failure[0] from None
            if e.code() == grpc.StatusCode.UNIMPLEMENTED and answered == 0:
                with taking:                          # the frames taken so far, none after
                    stop.set()
                    sent = list(pending)
                raise Unsupported(sent) from None
            if e.code() == grpc.StatusCode.UNAUTHENTICATED:
                raise ClientError(Code.UNAUTHORIZED, e.details()) from None
            raise
        finally:
            stop.set()
            watch.stop()
        if failure:
            raise failure[0]
