"""The send dedup window: (topic, message id) -> (queue offset, commit-log offset, transaction id) of
recent stores. The official clients resend a message with the same id after a timeout; the retry is
answered from here instead of being stored twice. In memory; across a restart (or kill -9) the send
path looks ids it misses up in the store's index for send_dedup_after_restart_s after the start
(resends.py); the window itself is never written anywhere, so nothing of it outlives the process.

A message is known by its **key**: SipHash-2-4 (128-bit output) of its topic and id under ``KEY``, 16
random bytes drawn when the process starts (tidemq/accel_c/dedup.c): nobody outside can compute a
key, so nobody can craft an id whose key is another message's. A key that matches is not taken on
its word: resends.py reads the stored record at the entry's commit-log offset and answers it as a
duplicate only when the record's topic and id are the message's own. Two generations of tables,
each an open-addressed table of keys and values (queue offset, commit-log offset) in two bytearrays
(``_Table``), at most half full: entries go into the newer one; when it holds ``size`` entries it
becomes the older one and the previous older one is emptied. So at least the last ``size`` stores
are recognised, at most ``2 x size``. A SendRecords batch is looked up with one call (``find_keys``,
usually answering {}) and remembered with one (``put_keys``): no Python object per message.
Transaction ids (SendMessage's TRANSACTION messages, few) are kept beside, per generation. Size 0
turns the window off.

The table loops are compiled (tidemq._accel: id_hash, window_find, window_put) or their
Python twins below (same keys, same answers: tests/test_accel.py).
"""

from __future__ import annotations

import os
import struct
from array import array

import numpy as np

from ...accel import ACCEL

KEY_BYTES = 16
KEY = os.urandom(16)             # this process's SipHash key: never stored, never sent
_KEY = struct.Struct("=QQ")
_M64 = (1 << 64) - 1


# the Python twins of the compiled loops ---------------------------------------------------------
def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _sipround(v0: int, v1: int, v2: int, v3: int) -> tuple[int, int, int, int]:
    v0 = (v0 + v1) & _M64
    v1 = _rotl(v1, 13) ^ v0
    v0 = _rotl(v0, 32)
    v2 = (v2 + v3) & _M64
    v3 = _rotl(v3, 16) ^ v2
    v0 = (v0 + v3) & _M64
    v3 = _rotl(v3, 21) ^ v0
    v2 = (v2 + v1) & _M64
    v1 = _rotl(v1, 17) ^ v2
    v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


def siphash128(key: bytes, data: bytes) -> tuple[int, int]:
    """SipHash-2-4 with 128 bits of output (the reference's outlen 16) of ``data`` under ``key``
    (16 bytes): its two halves, as its little-endian output bytes read as two uint64."""
    k0, k1 = struct.unpack("<QQ", key)
    v0, v1 = 0x736F6D6570736575 ^ k0, 0x646F72616E646F6D ^ k1 ^ 0xEE
    v2, v3 = 0x6C7967656E657261 ^ k0, 0x7465646279746573 ^ k1
    n = len(data)
    whole = n - n % 8
    for (m,) in struct.iter_unpack("<Q", data[:whole]):
        v3 ^= m
        v0, v1, v2, v3 = _sipround(*_sipround(v0, v1, v2, v3))
        v0 ^= m
    b = ((n & 0xFF) << 56) | int.from_bytes(data[whole:], "little")
    v3 ^= b
    v0, v1, v2, v3 = _sipround(*_sipround(v0, v1, v2, v3))
    v0 ^= b
    v2 ^= 0xEE
    for _ in range(4):
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    h1 = v0 ^ v1 ^ v2 ^ v3
    v1 ^= 0xDD
    for _ in range(4):
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    return h1, v0 ^ v1 ^ v2 ^ v3


def key_at(keys, i: int) -> bytes:
    """The ``i``-th dedup key of ``keys`` (KEY_BYTES each, one after the other) as bytes: ``keys`` itself
    when it is one key's bytes (then ``i`` is 0)."""
    if type(keys) is bytes and len(keys) == KEY_BYTES:
        return keys
    return bytes(keys[KEY_BYTES * i:KEY_BYTES * (i + 1)])


def py_id_hash(key: bytes, topic: bytes, message_id: bytes) -> bytes:
    """The window's key of (topic, id): siphash128(key, topic + b"\\0" + id) as two native uint64;
    (0, 0) is an empty slot, so it is taken as (1, 0). Twin of tidemq._accel.id_hash."""
    if len(key) != KEY_BYTES:
        raise ValueError("id_hash: the key is 16 bytes")
    h1, h2 = siphash128(bytes(key), bytes(topic) + b"\0" + bytes(message_id))
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


def _table(keys, vals):
    k, v = memoryview(keys).cast("Q"), memoryview(vals).cast("q")
    cap = len(v) // 2
    if cap == 0 or cap & (cap - 1) or len(k) != 2 * cap:
        raise ValueError("a window table: keys of 16 bytes and values of 16 per slot, a power of 2 of slots")
    return k, v, cap


def py_window_find(new_keys, new_vals, old_keys, old_vals, hashes) -> list[tuple[int, int, int, int]]:
    """[(i, queue offset, commit-log offset, generation)] of the keys in ``hashes`` the newer (0) or
    older (1) table holds. Twin of tidemq._accel.window_find."""
    out = []
    tables = [_table(new_keys, new_vals), _table(old_keys, old_vals)]
    raw = bytes(hashes)
    if len(raw) % 16:
        raise ValueError("window_find: hashes of 16 bytes each")
    for i, (h1, h2) in enumerate(_KEY.iter_unpack(raw)):
        if h1 == 0 and h2 == 0:
            continue
        for gen, (keys, vals, cap) in enumerate(tables):
            s, found = _probe(keys, cap, h1, h2)
            if found:
                out.append((i, vals[2 * s], vals[2 * s + 1], gen))
                break
    return out


def py_window_put(keys, vals, hashes, qoffs, physs, select, start: int, room: int) -> tuple[int, int]:
    """Put the selected keys of ``hashes`` with their values (``qoffs``, ``physs``) from ``start`` on, at
    most ``room`` new ones: (the index to go on from, how many new keys). Twin of tidemq._accel.window_put."""
    k, v, cap = _table(keys, vals)
    qs = memoryview(qoffs).cast("B").cast("q")
    ps = memoryview(physs).cast("B").cast("q")
    hs = list(_KEY.iter_unpack(bytes(hashes)))
    if len(qs) != len(hs) or len(ps) != len(hs) or start < 0 or room < 0:
        raise ValueError("window_put: hashes of 16 bytes and two values of 8 per message")
    sel = bytes(select) if select is not None else None
    i, added = start, 0
    while i < len(hs) and added < room:
        h1, h2 = hs[i]
        if (h1 or h2) and (sel is None or sel[i]):
            s, found = _probe(k, cap, h1, h2)
            if s >= cap:
                raise ValueError("window_put: the table is full")
            if not found:
                k[2 * s], k[2 * s + 1] = h1, h2
                added += 1
            v[2 * s], v[2 * s + 1] = qs[i], ps[i]
        i += 1
    return i, added


if ACCEL is not None:
    id_hash, window_find, window_put = ACCEL.id_hash, ACCEL.window_find, ACCEL.window_put
else:
    id_hash, window_find, window_put = py_id_hash, py_window_find, py_window_put


# the window ---------------------------------------------------------------------------------------
class _Table:
    """One generation: ``cap`` slots of keys (16 bytes) and values (int64 queue offset, int64 commit-log
    offset), and the transaction ids of the entries that have one."""

    __slots__ = ("keys", "vals", "txns", "count")

    def __init__(self, cap: int) -> None:
        self.keys = bytearray(KEY_BYTES * cap)
        self.vals = bytearray(16 * cap)
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
        self._one_off, self._one_phys = array("q", (0,)), array("q", (0,))     # put_key's values

    @staticmethod
    def key(topic: str, message_id: str) -> bytes:
        return id_hash(KEY, topic.encode(), message_id.encode("utf-8", "surrogatepass"))

    def get(self, topic: str, message_id: str) -> tuple[int, int, str] | None:
        """(queue offset, commit-log offset, transaction id) of a recent store whose key is this id's,
        or None (a match to confirm against the stored record: resends.py)."""
        return self.get_key(self.key(topic, message_id))

    def get_key(self, key: bytes) -> tuple[int, int, str] | None:
        return self.find_keys(key).get(0)

    def find_keys(self, keys) -> dict[int, tuple[int, int, str]]:
        """{i: (queue offset, commit-log offset, transaction id)} of the keys (``keys``: KEY_BYTES each,
        zero: none) of recent stores; one call for a whole batch, {} in the common case."""
        new, old = self._new, self._old
        if self.size <= 0:
            return {}
        out = {}
        for i, qoff, phys, gen in window_find(new.keys, new.vals, old.keys, old.vals, keys):
            t = (new, old)[gen]
            out[i] = (qoff, phys, t.txns.get(bytes(keys[KEY_BYTES * i:KEY_BYTES * (i + 1)]), "") if t.txns else "")
        return out

    def put(self, topic: str, message_id: str, offset: int, phys: int, txn: str = "") -> None:
        self.put_key(self.key(topic, message_id), offset, phys, txn)

    def put_key(self, key: bytes, offset: int, phys: int, txn: str = "") -> None:
        if self.size <= 0:
            return
        if txn:
            self._new.txns[key] = txn         # the table it goes into: a turn below takes it along
        one_off, one_phys = self._one_off, self._one_phys     # (no arrays made per store)
        one_off[0], one_phys[0] = offset, phys
        new = self._new
        _, added = window_put(new.keys, new.vals, key, one_off, one_phys, None, 0, self.size - new.count)
        new.count += added
        if new.count >= self.size:
            self._old.clear()
            self._old, self._new = new, self._old

    def put_keys(self, keys, offsets, physs, select=None) -> None:
        """Remember stores: ``keys`` (KEY_BYTES each) with ``offsets`` (queue offsets) and ``physs``
        (commit-log offsets of the records: int64, one per key, array("q") or numpy arrays), those where
        ``select`` (a bool array, or None: all) is true."""
        if self.size <= 0:
            return                          # the window is off
        if type(offsets) is not array:
            offsets = np.ascontiguousarray(offsets, np.int64)
        if type(physs) is not array:
            physs = np.ascontiguousarray(physs, np.int64)
        sel = None if select is None else np.ascontiguousarray(select, np.uint8)
        i, n = 0, len(offsets)
        while i < n:
            new = self._new
            i, added = window_put(new.keys, new.vals, keys, offsets, physs, sel, i, self.size - new.count)
            new.count += added
            if new.count >= self.size:
                self._old.clear()
                self._old, self._new = new, self._old

    def __len__(self) -> int:
        return self._new.count + self._old.count
