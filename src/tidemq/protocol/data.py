"""tidemq's own additions to the wire, next to ``apache.rocketmq.v2.MessagingService`` on the
same port (docs/broker-protocol.md, 4.11).

``/tidemq.Data/<Method>``: calls with raw bytes both ways (no protobuf, no serializers):

    SendRecords         unary: a batch of NORMAL messages of one topic (send_frame.py)
    SendRecordsStream   streamed both ways: SendRecords frames one after the other on one call,
                        each answered (SendRecords' answer) in order: many batches without a
                        call each
    PullRecords         unary: records of one queue by offset, as the commit log stores them
                        (pull_frame.py)
    PullRecordsStream   a PullRecords request answered with a stream of its responses, each
                        from where the one before ended: a stretch of a queue without a call
                        per pull

SendMessage (the protocol's own RPC) keeps its answer exactly as the official clients expect
it. What tidemq adds to it is trailing metadata that clients which do not know it ignore:

    tidemq-duplicates: <i>,<j>,...   indexes (in the request) of the messages answered from the
                                     broker's dedup window (a resend of a message already stored:
                                     status OK with the first store's offset); absent when none
"""

from __future__ import annotations

from typing import Iterable

SERVICE = "tidemq.Data"
SEND_RECORDS = "SendRecords"
SEND_RECORDS_STREAM = "SendRecordsStream"
PULL_RECORDS = "PullRecords"
SEND_RECORDS_PATH = f"/{SERVICE}/{SEND_RECORDS}"      # what a channel's unary_unary is given
SEND_RECORDS_STREAM_PATH = f"/{SERVICE}/{SEND_RECORDS_STREAM}"
PULL_RECORDS_PATH = f"/{SERVICE}/{PULL_RECORDS}"
PULL_RECORDS_STREAM = "PullRecordsStream"
PULL_RECORDS_STREAM_PATH = f"/{SERVICE}/{PULL_RECORDS_STREAM}"

DUPLICATES_TRAILER = "tidemq-duplicates"


class FrameError(ValueError):
    """Bytes that are not a tidemq.Data frame (the broker answers BAD_REQUEST with this text)."""


def duplicates_trailer(indexes: Iterable[int]) -> tuple[tuple[str, str], ...]:
    """The trailing metadata of a SendMessage answer whose messages at ``indexes`` were duplicates
    (empty: no trailer)."""
    text = ",".join(str(i) for i in indexes)
    return ((DUPLICATES_TRAILER, text),) if text else ()


def duplicates_of(trailing_metadata) -> frozenset[int]:
    """The indexes a SendMessage answer's trailing metadata names as duplicates (none: empty). A
    value that is not a list of indexes names none."""
    for k, v in trailing_metadata or ():
        if k == DUPLICATES_TRAILER:
            try:
                return frozenset(int(x) for x in v.split(",") if x)
            except (ValueError, TypeError, AttributeError):
                return frozenset()
    return frozenset()
