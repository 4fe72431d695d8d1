"""The key receipt handles are signed with (consume/pop_state.py), kept in ``<root>/broker/pop/secret``.

The key is 32 random bytes written as 64 lower-case hex digits; the HMAC of every handle is made
with those 64 digits as its key (what the broker always did: handles given out before stay valid).

On disk (since this module), a checked document (tidemq/checked.py: a CRC over the JSON), kept
mirrored (``secret.bak`` is the same version, so damage to one copy falls back to the same key)::

    {"crc32":"1a2b3c4d","doc":{"key":"<64 hex digits>"}}

A file written before it (the 64 digits alone, no CRC) is read as it is and written again checked.

A key that is damaged is never used. Before, the file was used as read: a file cut short or emptied
(a torn copy, a full disk) made the key short or empty, and a handle MACed under the empty key is
one anyone can make (an ack or a change of invisibility of any message of a topic the caller may
``sub``). Now, in this order:

* the file intact: its key;
* the file damaged (CRC, not JSON, not 64 hex digits), its mirror intact: the mirror's key, the same
  one: no handle breaks (WARNING);
* both damaged or missing once a key was there: a **new** key (ERROR, the damaged files kept as
  ``*.damaged``). The trade-off: every handle given out before fails (INVALID_RECEIPT_HANDLE): their
  messages come again once their invisible time is over (at least once; nothing acked is lost, the
  acks are in the pop journal, not in the handles). A key rebuilt from what is left of a damaged one
  would keep them, and would let whoever can guess what is left make handles: refused.

A damaged legacy file whose digits are still 64 hex digits (a digit flipped into another) cannot be
told from an intact one: its key is then one nobody knows either (no forgery comes of it); the
handles given out before fail as above.
"""

from __future__ import annotations

import logging
import os
import re

from ... import checked
from ...io import FileIO, read_whole

log = logging.getLogger("tidemq.broker")

KEY_HEX_DIGITS = 64
_KEY = re.compile(rb"[0-9a-f]{64}")


def valid(key: bytes | str) -> bool:
    """Whether ``key`` is a whole handle key (64 lower-case hex digits)."""
    if isinstance(key, str):
        key = key.encode()
    return _KEY.fullmatch(key) is not None


def new_key() -> bytes:
    return os.urandom(KEY_HEX_DIGITS // 2).hex().encode()


def _check(doc) -> None:
    if not isinstance(doc, dict) or not valid(str(doc.get("key", ""))):
        raise ValueError("not a receipt-handle key (64 hex digits)")


def write(fio: FileIO, path: str, key: bytes) -> None:
    """Write ``key`` checked and mirrored (ValueError when it is not a whole key)."""
    if not valid(key):
        raise ValueError("not a receipt-handle key (64 hex digits)")
    checked.write_mirrored(fio, path, {"key": key.decode()})


def load(fio: FileIO, path: str) -> bytes:
    """The key at ``path`` (made when there is none; a new one when every copy is damaged)."""
    if fio.exists(path):
        raw = read_whole(fio, path)
        if valid(raw.strip()) and not raw.startswith(b"{"):
            key = raw.strip()                       # written before the checked format: kept, rewritten
            write(fio, path, key)
            return key
    got = checked.load(fio, path, "receipt-handle key", _check)
    if got.doc is not None:
        key = str(got.doc["key"]).encode()
        if got.source is checked.Source.BACKUP:
            write(fio, path, key)                   # the file again, from its intact mirror
        return key
    key = new_key()
    if got.source is checked.Source.LOST:
        log.error("receipt-handle key %s: every copy is damaged (%s): a new key is made; receipt handles given "
                  "out before it are refused (INVALID_RECEIPT_HANDLE) and their messages come again after their "
                  "invisible time", path, got.problem)
    write(fio, path, key)
    return key


def store(fio: FileIO, path: str, key: bytes) -> None:
    """Make ``key`` (a leader's, copied to its follower: replication/state.py) the one at ``path``:
    written only when the file does not hold it already."""
    if not valid(key):
        raise ValueError("not a receipt-handle key (64 hex digits)")
    try:
        doc = checked.decode(read_whole(fio, path)) if fio.exists(path) else None
    except checked.Damaged:
        doc = None
    if not (isinstance(doc, dict) and doc.get("key") == key.decode() and fio.exists(path + ".bak")):
        write(fio, path, key)
