"""Small state files that a damaged disk cannot turn into a crash or into a wrong value.

The broker's own state (committed offsets, the timer's progress, the snapshots of the pop and
transaction journals) and the store's small records (early seals, the archive manifest and its
gaps) are small JSON rewritten atomically. Atomic writes protect it from a
crash; they do not protect it from the disk: a file of random bytes, an empty file or a flipped
digit (an offset of 1000 read as 9000 makes a group skip 8000 messages) must be recognised, and
a broker must still start.

On disk, a checked document is one JSON object with a fixed-length prefix:

    {"crc32":"1a2b3c4d","doc":<the document, compact JSON>}

``crc32`` (8 lower-case hex digits) is the CRC-32 of the bytes of ``<the document>`` exactly
as written, which lie between the 26-byte prefix and the final ``}``: the check needs no
parsing. The file stays JSON a person or ``jq`` can read. A file written before this format
(plain JSON, no prefix) is read as it is, with nothing to check.

Every write keeps the version it replaces as ``<name>.bak`` (RocketMQ's ConfigManager keeps
``.bak`` copies for the same reason): rename the current file to ``.bak``, then write the new
one atomically (io.write_atomic). A crash between the two leaves only the ``.bak``: the version
before the write that did not finish. A document whose previous version must never come back
(users and ACLs, topics) is written with :func:`write_mirrored`: its ``.bak`` is then made the new
version too, so damage falls back to the version in effect.

:func:`load` returns the document and where it came from (:class:`Source`): the file; its
backup when the file is damaged or missing (WARNING: the changes of the last write are not in
it); nothing (ERROR) when both are unreadable. A damaged file is moved aside to
``<name>.damaged`` (the newest damage kept) for a post-mortem, never deleted, and never read
again. The owner decides what "nothing" means (start over, and say what that costs).
"""

from __future__ import annotations

import enum
import json
import logging
import os
from typing import Any, Callable, NamedTuple

from .record.crc import crc32
from .io import FileIO, NotDurable, read_whole, write_atomic

log = logging.getLogger("tidemq")

_PREFIX = b'{"crc32":"'
_MIDDLE = b'","doc":'
HEADER_BYTES = len(_PREFIX) + 8 + len(_MIDDLE)
assert HEADER_BYTES == 26


class Source(enum.Enum):
    NONE = "none"                  # no file: a new state
    FILE = "file"                  # the file, intact
    BACKUP = "backup"              # the file was damaged or missing, its .bak was intact
    LOST = "lost"                  # file and backup damaged: the owner starts over


class Loaded(NamedTuple):
    doc: Any                       # None unless FILE or BACKUP
    source: Source
    problem: str                   # what was wrong, for the log and status ("" when nothing)


def encode(doc: Any) -> bytes:
    """``doc`` as a checked document (the bytes of the file)."""
    body = json.dumps(doc, separators=(",", ":")).encode()
    return b"%s%08x%s%s}" % (_PREFIX, crc32(body), _MIDDLE, body)


class Damaged(ValueError):
    """The bytes are not an intact document."""


def decode(raw: bytes) -> Any:
    """The document in ``raw`` (checked format, or plain JSON written before it); raises
    :class:`Damaged` when the CRC fails or the bytes are not JSON."""
    if raw.startswith(_PREFIX):
        if len(raw) < HEADER_BYTES + 1 or raw[HEADER_BYTES - len(_MIDDLE):HEADER_BYTES] != _MIDDLE \
                or not raw.endswith(b"}"):
            raise Damaged("not a whole checked document")
        body = raw[HEADER_BYTES:-1]
        try:
            want = int(raw[len(_PREFIX):len(_PREFIX) + 8], 16)
        except ValueError:
            raise Damaged("its CRC is not a number") from None
        if crc32(body) != want:
            raise Damaged("CRC mismatch")
        raw = body
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise Damaged(f"its document is not JSON ({type(e).__name__})") from None
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise Damaged(f"not JSON ({type(e).__name__})") from None
    if isinstance(doc, dict) and len(doc) == 2 and "doc" in doc:
        # no state the broker wrote before this format looks like this: a checked document
        # whose prefix is damaged, never a plain one
        raise Damaged("a checked document with a damaged header")
    return doc


def write(fio: FileIO, path: str, doc: Any) -> None:
    """Write ``doc`` to ``path`` (atomically), the version it replaces kept as ``path.bak``.

    OSError: the version in effect is what a read finds (the caller keeps it in effect: nothing
    changed now). NotDurable (the directory's fsync failed after the rename): the new version is
    taken back (the previous one renamed back in place, or a first version removed) so that a read
    finds the version in effect, and NotDurable is raised: neither rename's durability is known, so
    after a crash either version may be found -- the caller answers neither OK nor "nothing changed"
    (the admin's STATE_NOT_DURABLE: send the same change again)."""
    data = encode(doc)
    had = fio.exists(path)
    if had:
        fio.rename(path, path + ".bak")
    try:
        write_atomic(fio, path, data)
    except NotDurable:
        _take_back(fio, path, had)
        raise


def _take_back(fio: FileIO, path: str, had: bool) -> None:
    """The version ``write`` put at ``path`` replaced by the one before it (``had``: there was one, now
    ``path.bak``; else none). Its durability is not known either (best effort)."""
    try:
        if had:
            fio.rename(path + ".bak", path)
        else:
            fio.unlink(path)
    except OSError as e:
        log.error("%s: a new version whose directory could not be made durable could not be taken back "
                  "either (%s): it is what a read (the next start) finds", path, e)
        return
    try:
        fio.fsync_dir(os.path.dirname(path) or ".")
    except OSError:
        pass                        # (the caller says already that either version may be found)


def write_mirrored(fio: FileIO, path: str, doc: Any) -> None:
    """``write``, then ``path.bak`` made the same version too: a damaged file falls back to the
    version in effect, never to the one before it -- for a document whose previous version must
    not come back (users and ACLs: a user deleted or a permission revoked just before the damage
    would be allowed again; topics: a deleted topic's end). At every crash point one intact copy
    is there (the new file, or the old .bak while the new file is written). A .bak that cannot be
    written (a full disk) is removed, and the write stands: the new file is in place and durable."""
    write(fio, path, doc)
    try:
        write_atomic(fio, path + ".bak", encode(doc))
    except NotDurable:
        pass                        # the .bak is the new version (its durability unknown): mirrored
    except OSError as e:
        # the new version is in place and durable (write's directory fsync succeeded): the change
        # stands (raising would tell the caller "nothing changed" while every read and the next start
        # find the new version). The .bak holds the version before, which must not come back: removed
        try:
            if fio.exists(path + ".bak"):
                fio.unlink(path + ".bak")
            gone = "removed"
        except OSError as e2:
            gone = f"could not be removed either ({e2}): damage to {path} falls back to the version before"
        log.warning("%s: written, but its copy %s.bak could not be made the same version (%s); the copy is %s",
                    path, path, e, gone)


def load(fio: FileIO, path: str, what: str, check: Callable[[Any], None] = lambda doc: None) -> Loaded:
    """Read the document at ``path`` (falling back to ``path.bak``); ``what`` names it in the
    log ("consumer offsets"). ``check(doc)`` raises when a document that decodes is still not
    one the owner can use (a wrong shape): that counts as damage too."""
    problems = []
    for candidate, source in ((path, Source.FILE), (path + ".bak", Source.BACKUP)):
        if not fio.exists(candidate):
            continue
        try:
            doc = decode(read_whole(fio, candidate))
            check(doc)
        except Exception as e:  # noqa: BLE001 - whatever is wrong with it, it is not usable state
            problems.append(f"{candidate}: {e}")
            _set_aside(fio, candidate)
            continue
        if source is Source.BACKUP and not problems:
            # the file is missing, its backup is whole: a crash between write()'s two renames
            log.info("%s: %s is missing, its previous version %s is used", what, path, candidate)
        elif problems:
            log.warning("%s: %s; the previous version %s is used (the last changes before the damage "
                        "are not in it)", what, "; ".join(problems), candidate)
        return Loaded(doc, source, "; ".join(problems))
    if problems:
        log.error("%s: %s; no intact copy is left: starting without it (the damaged files are kept as "
                  "*.damaged)", what, "; ".join(problems))
        return Loaded(None, Source.LOST, "; ".join(problems))
    return Loaded(None, Source.NONE, "")


def _set_aside(fio: FileIO, path: str) -> None:
    """A damaged file is never read again, and kept for whoever wants to look at it."""
    try:
        fio.rename(path, path + ".damaged")
    except OSError as e:
        log.warning("%s could not be moved aside (%s)", path, e)
