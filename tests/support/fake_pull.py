"""A fake ``/tidemq.Data/PullRecords`` server on a free 127.0.0.1 port: it answers every pull
from a list of records, with the frame as ``mangle`` makes it (a wrong frame CRC, none, a
damaged record): what a broker or a network could hand a reader, for the JVM reader's tests."""

from __future__ import annotations

import json
from concurrent import futures
from contextlib import contextmanager

import grpc
import numpy as np

from tidemq.protocol import data, pull_frame
from tidemq.protocol.stubs import Code


@contextmanager
def fake_pull_server(records: list[bytes], mangle=None, bytes_max: int | None = None, served: list | None = None,
                     says_bound: bool = True):
    """Yields the endpoint; ``records[i]`` is queue offset i. ``mangle(header, sizes, body)`` ->
    (header, sizes, body) edits each response (sizes: numpy i32 little-endian, body: bytearray);
    the frame CRC is computed before it, so an edited body fails it unless the header is edited too.
    ``bytes_max``: an answer's records stop within the request's max_bytes and this bound, as the
    broker's do (Records._max_bytes: its gRPC message limit less the sizes and the header; one
    record always goes), and said in each answer's header (``bytes_max``: records and sizes fit in
    ``bytes_max`` less 4096) unless ``says_bound`` is False (a broker from before that field).
    ``served``: (offset, records) of every answer is appended to it."""

    def pull(raw: bytes, _context) -> bytes:
        req = pull_frame.decode_request(raw)
        got = records[req.offset:req.offset + req.max_count]
        if bytes_max is not None:
            room, n = min(req.max_bytes, bytes_max - 4 * req.max_count - 4096), 0
            for r in got:
                if n and room < len(r):
                    break
                room, n = room - len(r), n + 1
            got = got[:n]
        if served is not None:
            served.append((req.offset, len(got)))
        if not got:
            return pull_frame.encode_response({"code": Code.ILLEGAL_OFFSET, "next_offset": len(records),
                                               "max_offset": len(records), "count": 0})
        sizes = np.array([len(r) for r in got], "<i4")
        body = bytearray(b"".join(got))
        header = {"code": Code.OK, "next_offset": req.offset + len(got), "max_offset": len(records),
                  "count": len(got), "crc32": pull_frame.frame_crc(sizes.tobytes(), bytes(body))}
        if bytes_max is not None and says_bound:
            header["bytes_max"] = bytes_max - 4096
        if mangle is not None:
            header, sizes, body = mangle(header, sizes, body)
        h = json.dumps(header).encode()
        return b"".join((pull_frame.HEAD.pack(len(h)), h, sizes.tobytes(), bytes(body)))

    handler = grpc.method_handlers_generic_handler(data.SERVICE, {
        data.PULL_RECORDS: grpc.unary_unary_rpc_method_handler(pull)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(grace=None).wait()
