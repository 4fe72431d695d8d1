"""``/tidemq.Data/PullRecords``: raw record reads for bulk readers (the frames:
protocol/pull_frame.py).

PullMessage streams one protobuf Message per message: right for the official
clients, but the per-message protobuf and stream cost bounds a bulk reader at a
few thousand messages a second. This method answers a pull with the records as
the commit log stores them, back to back in one response, which tidemq.client
and the Spark source decode in bulk (record/codec's layout, spark/decode).
"""

from __future__ import annotations

import asyncio

from ...protocol.data import FrameError
from ...protocol.pull_frame import BYTES_MAX, decode_request, encode_head, encode_response
from ...protocol.stubs import Code
from ...store import GetStatus, MessageStore
from ...store.unit_repair import WalkFailed
from ...record.codec import valid_topic
from ...record.framing import ROOM
from ..observe.outcomes import OK, Outcomes
from ..protection.access import sub_allowed_now
from ..topic_names import read_refusal
from .pull import WalkFailures, long_poll, readable_waker

RESPONSE_SLACK_BYTES = 4096     # the response's header and gRPC framing, besides sizes and records


def _found_head(bytes_max: int):
    """head(next_offset, min_offset, max_offset, count, crc): the header of a FOUND answer, for the
    store to write into the frame's room as it makes it (frame_crc: ``crc``; ``bytes_max``: the
    broker's own bound on an answer's records); None when it does not fit (the answer is then made
    by encode_response)."""
    def head(next_offset: int, min_offset: int, max_offset: int, count: int, crc: int) -> bytes | None:
        return encode_head({"status": "FOUND", "next_offset": next_offset, "min_offset": min_offset,
                            "max_offset": max_offset, "count": count, "code": Code.OK, "bytes_max": bytes_max},
                           crc, ROOM)
    return head


class Records:
    def __init__(self, store: MessageStore, arrivals: asyncio.Event, max_message_bytes: int,
                 bytes_max: int = BYTES_MAX, got: Outcomes | None = None) -> None:
        self.store = store
        self.got = got if got is not None else Outcomes()     # messages handed out, by topic and status
        self.arrivals = arrivals
        self.max_message_bytes = max_message_bytes        # what gRPC lets the response carry
        self.bytes_max = bytes_max                        # record bytes one response carries at most
        self.quotas = None                                # protection/quotas.Quotas: fetch byte rates
        self.acl = None                                   # protection/acl.Acl with authentication on
        # what any answer's records and their sizes fit in (the header's bytes_max: readers size pulls to it)
        self.answer_bytes_max = max(1, min(bytes_max, max_message_bytes - RESPONSE_SLACK_BYTES))
        self._head = _found_head(self.answer_bytes_max)
        self.walk_failures = WalkFailures("PullRecords")

    async def pull(self, raw: bytes, context) -> bytes:
        req, refusal = self._request(raw)
        if refusal is not None:
            return refusal
        max_bytes = self._max_bytes(req)
        ents, over = self.quotas.fetch_admit(context, req.topic) if self.quotas is not None else ([], None)
        if over is not None:
            return encode_response({"code": Code.TOO_MANY_REQUESTS, "message": over})
        try:
            g = await long_poll(lambda: self.store.get_raw(req.topic, req.queue_id, req.offset, req.max_count,
                                                           max_bytes, ROOM, self._head),
                                self.arrivals, req.wait_ms / 1000, context, readable_waker(self.store, self.arrivals))
        except WalkFailed as e:
            return self._walk_failed(req.topic, req.queue_id, req.offset, e)
        self.walk_failures.served(req.topic, req.queue_id)
        why = sub_allowed_now(self.acl, req.topic) if req.wait_ms > 0 else None    # a revoke while it waited
        if why is not None:
            return _revoked(why)
        if ents and g.status is GetStatus.FOUND:
            await self.quotas.fetch_charge(ents, len(g.records[1]))
        return self._response(req.topic, g)

    async def stream(self, raw: bytes, context):
        """``/tidemq.Data/PullRecordsStream``: the pulls of [offset, end) one after the other on one
        call, each answered as ``pull`` answers it and starting where the one before ended (holes
        and cleaned stretches are crossed as their answers say). It ends at ``end``; without one at
        the queue's end, or with ``wait_ms`` never (at the end it long-polls and goes on); after an
        answer that is an error. gRPC's flow control keeps it at most a window ahead of the reader."""
        req, refusal = self._request(raw)
        if refusal is not None:
            yield refusal
            return
        topic, qid, end, wait_s = req.topic, req.queue_id, req.end, req.wait_ms / 1000
        offset, max_bytes = req.offset, self._max_bytes(req)
        wake = readable_waker(self.store, self.arrivals)
        while end is None or offset < end:
            n = req.max_count if end is None else min(req.max_count, end - offset)
            at = offset
            ents, over = self.quotas.fetch_admit(context, topic) if self.quotas is not None else ([], None)
            if over is not None:
                yield encode_response({"code": Code.TOO_MANY_REQUESTS, "message": over})
                return
            try:
                g = await long_poll(lambda: self.store.get_raw(topic, qid, at, n, max_bytes, ROOM, self._head),
                                    self.arrivals, wait_s, context, wake)
            except WalkFailed as e:
                yield self._walk_failed(topic, qid, at, e)     # an error: the stream ends (pull again from ``at``)
                return
            self.walk_failures.served(topic, qid)
            # the guard checked the call when it began: a revoke since ends it
            why = sub_allowed_now(self.acl, topic)
            if why is not None:
                yield _revoked(why)
                return
            if ents and g.status is GetStatus.FOUND:
                await self.quotas.fetch_charge(ents, len(g.records[1]))
            yield self._response(topic, g)
            if g.status is GetStatus.FOUND:
                offset = g.next_offset
                if wait_s <= 0 and offset >= g.max_offset:
                    return                                # the queue's end, as this answer saw it
            elif g.next_offset > offset and g.status is not GetStatus.SERVICE_NOT_AVAILABLE:
                offset = g.next_offset                     # holes, or records cleaned away
            elif wait_s <= 0 or g.status not in (GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.NO_MESSAGE_IN_QUEUE):
                return                                     # the end, or an error: said in the last answer

    def _walk_failed(self, topic: str, queue_id: int, offset: int, e: WalkFailed) -> bytes:
        """The answer of a pull at a consume-queue unit whose walk aside failed (nothing readable before
        it): INTERNAL_SERVER_ERROR, next_offset the same offset (pull again; the walk is tried again)."""
        return encode_response({"code": Code.INTERNAL_SERVER_ERROR, "status": GetStatus.SERVICE_NOT_AVAILABLE.name,
                                "message": self.walk_failures.failed(topic, queue_id, e), "next_offset": offset,
                                "count": 0})

    def _request(self, raw: bytes):
        """(the request, None), or (None, the answer that refuses it)."""
        try:
            req = decode_request(raw)
        except FrameError as e:
            return None, encode_response({"code": Code.BAD_REQUEST, "message": str(e)})
        topic, qid = req.topic, req.queue_id
        if not valid_topic(topic) or not 0 <= qid < self.store.queue_count(topic):
            return None, encode_response({"code": Code.TOPIC_NOT_FOUND,
                                          "message": f"no queue {qid} in topic {topic!r}"})
        why = read_refusal(topic)
        if why is not None:
            return None, encode_response({"code": Code.FORBIDDEN, "message": why})
        return req, None

    def _max_bytes(self, req) -> int:
        # the response must fit the gRPC limit: sizes, header and records together
        # (records and sizes within answer_bytes_max: what every answer's header says)
        return max(1, min(req.max_bytes, self.answer_bytes_max - 4 * req.max_count))

    def _response(self, topic: str, g) -> bytes:
        head = {"status": g.status.name, "next_offset": g.next_offset, "min_offset": g.min_offset,
                "max_offset": g.max_offset, "count": 0}
        if g.status is GetStatus.FOUND:
            sizes, data = g.records
            head.update(code=Code.OK, count=len(sizes), bytes_max=self.answer_bytes_max)
            self.got.add(topic, OK, len(sizes))
            if g.frame is not None and g.frame[2]:     # the header is in the room: records copied once
                frame = g.frame[0]
                return frame if type(frame) is bytes else bytes(frame)
            return encode_response(head, sizes, data)
        if g.status in (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY):
            head.update(code=Code.ILLEGAL_OFFSET,
                        message=f"{g.status.name}: queue holds [{g.min_offset}, {g.max_offset})")
        elif g.status is GetStatus.SERVICE_NOT_AVAILABLE:
            head.update(code=Code.INTERNAL_SERVER_ERROR, message="the store is not running")
        else:
            head.update(code=Code.MESSAGE_NOT_FOUND, message=g.status.name)
        return encode_response(head)


def _revoked(why: str) -> bytes:
    """The answer of a pull whose user may no longer sub on its topic (sub_allowed_now's text)."""
    return encode_response({"code": Code.FORBIDDEN, "message": why, "status": "REFUSED", "count": 0})
