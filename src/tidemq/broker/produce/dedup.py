"""The send dedup window: (topic, message id) -> (queue offset, transaction id) of recent
stores. The official clients resend a message with the same id after a timeout; the
retry is answered from here instead of being stored twice. In memory; across a restart
(or kill -9) the send path looks ids it misses up in the store's index for
send_dedup_after_restart_s after the start (send_path.SendPath.seen).

A message is known by its **key**: a 128-bit hash of its topic and id (``key``; which hash and
why 128 bits are enough to recognise a resend by its key alone: tidemq/accel_c/dedup.c). Two
generations of tables, each an open-addressed table of keys and queue offsets in two bytearrays
(``_Table``), at most half full: entries go into the newer one; when it holds ``size`` entries
it becomes the older one and the previous older one is emptied. So at least the last ``size``
stores are recognised, at most ``2 x size``. A SendRecords batch is looked up with one call
(``find_keys``, usually answering {}) and remembered with one (``put_keys``): no Python object
per message. Transaction ids (SendMessage's TRANSACTION messages, few) are kept beside, per
generation. Size 0 turns the window off.

The table loops are compiled (tidemq._accel: id_hash, window_find, window_put) or their
Python twins below (same keys, same answers: tests/test_accel.py).
"""

from __future__ import annotations

import struct
from array import array

import numpy as np

from ...accel import ACCEL

KEY_BYTES = 16
_KEY = struct.Struct("=QQ")
_M64 = (1 << 64) - 1


# the Python twins of the compiled loops ---------------------------------------------------------
def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _M64
    return k ^ (k >> 33)


def murmur3_128(data: bytes) -> tuple[int, int]:
    """MurmurHash3_x64_128 of ``data``, seed 0: (h1, h2)."""
    c1, c2 = 0x87C37B91114253D5, 0x4CF5AD432745937F
    h1 = h2 = 0
    n = len(data)
    nb = n // 16
    for k1, k2 in struct.iter_unpack("<QQ", data[:16 * nb]):
        k1 = (_rotl((k1 * c1) & _M64, 31) * c2) & _M64
        h1 = ((_rotl(h1 ^ k1, 27) + h2) * 5 + 0x52DCE729) & _M64
        k2 = (_rotl((k2 * c2) & _M64, 33) * c1) & _M64
        h2 = ((_rotl(h2 ^ k2, 31) + h1) * 5 + 0x38495AB5) & _M64
    tail = data[16 * nb:]
    if len(tail) > 8:
        h2 ^= (_rotl((int.from_bytes(tail[8:], "little") * c2) & _M64, 33) * c1) & _M64
    if tail:
        h1 ^= (_rotl((int.from_bytes(tail[:8], "little") * c1) & _M64, 31) * c2) & _M64
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 = (h1 + h2) & _M64
    return h1, (h2 + h1) & _M64


def py_id_hash(topic: bytes, message_id: bytes) -> bytes:
    """The window's key of (topic, id): murmur3_128(topic + b"\\0" + id) as two native uint64;
    (0, 0) is an empty slot, so it is taken as (1, 0). Twin of tidemq._accel.id_hash."""
    h1, h2 = murmur3_128(bytes(topic) + b"\0" + bytes(message_id))
    return _KEY.pack(1 if h1 == 0 and h2 == 0 else h1, h2)


def _probe(keys, cap: int, h1: int, h2: int) -> tuple[int, bool]:
    s = h1 & (cap - 1)
    for _ in range(cap):
        k1, k2 = keys[2 * s], keys[2 * s + 1]
        if k1 == h1 and k2 == h2:
            return s, True
        if k1 == 0 and k2 == 0:
            return s, False
        s = (s + 1) & (cap - 1)
    return cap, False


def py_window_find(new_keys, new_vals, old_keys, old_vals, hashes) -> list[tuple[int, int, int]]:
    """[(i, value, generation)] of the keys in ``hashes`` the newer (0) or older (1) table holds.
    Twin of tidemq._accel.window_find."""
    out = []
    tables = [(memoryview(k).cast("Q"), memoryview(v).cast("q")) for k, v in ((new_keys, new_vals),
                                                                              (old_keys, old_vals))]
    for i, (h1, h2) in enumerate(_KEY.iter_unpack(bytes(hashes))):
        if h1 == 0 and h2 == 0:
            continue
        for gen, (keys, vals) in enumerate(tables):
            s, found = _probe(keys, len(vals), h1, h2)
            if found:
                out.append((i, vals[s], gen))
                break
    return out


def py_window_put(keys, vals, hashes, values, select, start: int, room: int) -> tuple[int, int]:
    """Put the selected keys of ``hashes`` with their ``values`` from ``start`` on, at most ``room``
    new ones: (the index to go on from, how many new keys). Twin of tidemq._accel.window_put."""
    k, v = memoryview(keys).cast("Q"), memoryview(vals).cast("q")
    vs = memoryview(values).cast("B").cast("q")
    hs = list(_KEY.iter_unpack(bytes(hashes)))
    sel = bytes(select) if select is not None else None
    cap, i, added = len(v), start, 0
    while i < len(hs) and added < room:
        h1, h2 = hs[i]
        if (h1 or h2) and (sel is None or sel[i]):
            s, found = _probe(k, cap, h1, h2)
            if s >= cap:
                raise ValueError("window_put: the table is full")
            if not found:
                k[2 * s], k[2 * s + 1] = h1, h2
                added += 1
            v[s] = vs[i]
        i += 1
    return i, added


if ACCEL is not None:
    id_hash, window_find, window_put = ACCEL.id_hash, ACCEL.window_find, ACCEL.window_put
else:
    id_hash, window_find, window_put = py_id_hash, py_window_find, py_window_put


# the window ---------------------------------------------------------------------------------------
class _Table:
    """One generation: ``cap`` slots of keys (16 bytes) and values (int64), and the transaction
    ids of the entries that have one."""

    __slots__ = ("keys", "vals", "txns", "count")

    def __init__(self, cap: int) -> None:
        self.keys = bytearray(KEY_BYTES * cap)
        self.vals = bytearray(8 * cap)
        self.txns: dict[bytes, str] = {}
        self.count = 0

    def clear(self) -> None:
        np.frombuffer(self.keys, np.uint8).fill(0)      # a zero key is an empty slot (values need no clearing)
        self.txns.clear()
        self.count = 0


class DedupWindow:
    def __init__(self, size: int) -> None:
        self.size = size
        cap = 16
        while cap < 2 * size:           # at most half full: probes stay short
            cap <<= 1
        self._new = _Table(cap)
        self._old = _Table(cap)

    @staticmethod
    def key(topic: str, message_id: str) -> bytes:
        return id_hash(topic.encode(), message_id.encode("utf-8", "surrogatepass"))

    def get(self, topic: str, message_id: str) -> tuple[int, str] | None:
        """(queue offset, transaction id) of a recent store of this id, or None."""
        return self.get_key(self.key(topic, message_id))

    def get_key(self, key: bytes) -> tuple[int, str] | None:
        return self.find_keys(key).get(0)

    def find_keys(self, keys) -> dict[int, tuple[int, str]]:
        """{i: (queue offset, transaction id)} of the keys (``keys``: KEY_BYTES each, zero: none) of
        recent stores; one call for a whole batch, {} in the common case."""
        new, old = self._new, self._old
        if self.size <= 0:
            return {}
        out = {}
        for i, value, gen in window_find(new.keys, new.vals, old.keys, old.vals, keys):
            t = (new, old)[gen]
            out[i] = (value, t.txns.get(bytes(keys[KEY_BYTES * i:KEY_BYTES * (i + 1)]), "") if t.txns else "")
        return out

    def put(self, topic: str, message_id: str, offset: int, txn: str = "") -> None:
        self.put_key(self.key(topic, message_id), offset, txn)

    def put_key(self, key: bytes, offset: int, txn: str = "") -> None:
        if txn and self.size > 0:
            self._new.txns[key] = txn         # the table it goes into: a turn below takes it along
        self.put_keys(key, array("q", (offset,)))

    def put_keys(self, keys, offsets, select=None) -> None:
        """Remember stores: ``keys`` (KEY_BYTES each) with ``offsets`` (int64, one per key: an
        array("q") or a numpy array), those where ``select`` (a bool array, or None: all) is true."""
        if self.size <= 0:
            return                          # the window is off
        if type(offsets) is not array:
            offsets = np.ascontiguousarray(offsets, np.int64)
        sel = None if select is None else np.ascontiguousarray(select, np.uint8)
        i, n = 0, len(offsets)
        while i < n:
            new = self._new
            i, added = window_put(new.keys, new.vals, keys, offsets, sel, i, self.size - new.count)
            new.count += added
            if new.count >= self.size:
                self._old.clear()
                self._old, self._new = new, self._old

    def __len__(self) -> int:
        return self._new.count + self._old.count
