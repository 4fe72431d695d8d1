"""Authentication: every call signed with the RocketMQ 5 clients' ``MQv2-HMAC-SHA1`` signature (the
headers and how they are computed: protocol/signing.py) by a known user (acl.py: the broker's own
``access_key`` / ``secret_key``, and the users made with ``tidemq user create``).

Both the lower-case (Python client) and upper-case (Java client) hex digits are accepted. Keys and
signatures are compared in constant time, and an unknown access key costs the same HMAC as a known
one. The signed date must be fresh: within ``signature_window_s`` (15 min) of now, read as UTC
*or* as the broker's local time (the official Python client writes local time with a 'Z'; Java
and Node write UTC), so a captured header is refused once the window has passed; within it, TLS
keeps it from being captured.

``Authenticator.verify`` answers who signed (``Signed``) or why the call is refused
(``Unsigned``: a ``Failure`` for the log and the metric ``tidemq_auth_failures_total{reason}``, and
the text the caller gets). The caller is told "unknown access key or wrong signature" for both
(it learns nothing about which keys exist); the broker's log says which. Where a refusal is
answered, and how each RPC answers it: access.py.
"""

from __future__ import annotations

import calendar
import enum
import hashlib
import hmac
import logging
import threading
import time
from typing import Callable, Iterable, NamedTuple

from ...protocol.signing import AUTH_HEADER, DATE_HEADER, SignatureError, parse_authorization

log = logging.getLogger("tidemq.broker")

DATE_FORMAT = "%Y%m%dT%H%M%SZ"
WINDOW_S_DEFAULT = 900.0
_NO_SECRET = b"\0" * 20          # what an unknown key's signature is computed with (same cost, never matches)


class Failure(str, enum.Enum):
    """Why a call was not authenticated (the label of tidemq_auth_failures_total)."""
    NO_SIGNATURE = "no_signature"        # no authorization header
    MALFORMED = "malformed"              # not an MQv2-HMAC-SHA1 header, or no date header
    UNKNOWN_KEY = "unknown_key"          # no user has this access key
    BAD_SIGNATURE = "bad_signature"      # a known key, a signature not made with its secret
    STALE = "stale"                      # the signed date is not a date, or not within signature_window_s
    FORBIDDEN = "forbidden"              # authenticated, but the user may not do it (access.py)


class Signed(NamedTuple):
    access_key: str


class Unsigned(NamedTuple):
    failure: Failure
    access_key: str          # as the header says ("" without one): for the log
    text: str                # what the caller is told


def signed_at(date_time: str) -> tuple[float, float] | None:
    """The moments a signed date can mean: (read as UTC, read as local time); None if not a date."""
    try:
        t = time.strptime(date_time, DATE_FORMAT)
        return float(calendar.timegm(t)), time.mktime(t)
    except (ValueError, OverflowError):
        return None


class Authenticator:
    def __init__(self, secret_of: Callable[[str], str | None], window_s: float = WINDOW_S_DEFAULT,
                 now_s: Callable[[], float] = time.time) -> None:
        """``secret_of(access key)``: that user's secret key, or None (acl.Acl.secret_of)."""
        self.secret_of = secret_of
        self.window_s = window_s
        self.now_s = now_s

    @staticmethod
    def single(access_key: str, secret_key: str, window_s: float = WINDOW_S_DEFAULT,
               now_s: Callable[[], float] = time.time) -> "Authenticator":
        """One user: ``access_key`` with ``secret_key``."""
        return Authenticator(lambda ak: secret_key if ak == access_key else None, window_s, now_s)

    def verify(self, metadata: Iterable[tuple[str, str | bytes]] | None) -> Signed | Unsigned:
        headers = {k.lower(): v for k, v in (metadata or ()) if isinstance(v, str)}
        auth = headers.get(AUTH_HEADER)
        if not auth:
            return Unsigned(Failure.NO_SIGNATURE, "", "unauthorized: the request carries no authorization header "
                                                      "(access key / secret key required)")
        try:
            credential, signature = parse_authorization(auth)
        except SignatureError as e:
            return Unsigned(Failure.MALFORMED, "", f"unauthorized: {e}")
        date_time = headers.get(DATE_HEADER)
        if not date_time:
            return Unsigned(Failure.MALFORMED, credential,
                            f"unauthorized: the authorization header needs Credential and Signature, and {DATE_HEADER}")
        secret = self.secret_of(credential)
        key = secret.encode() if secret is not None else _NO_SECRET
        expected = hmac.new(key, date_time.encode(), hashlib.sha1).hexdigest().encode()
        good = hmac.compare_digest(signature.lower().encode(), expected)
        if secret is None or not good:
            return Unsigned(Failure.UNKNOWN_KEY if secret is None else Failure.BAD_SIGNATURE, credential,
                            "unauthorized: unknown access key or wrong signature")
        when = signed_at(date_time)
        if when is None:
            return Unsigned(Failure.STALE, credential,
                            f"unauthorized: {DATE_HEADER} {date_time[:40]!r} is not a date ({DATE_FORMAT})")
        now = self.now_s()
        if min(abs(now - when[0]), abs(now - when[1])) > self.window_s:
            return Unsigned(Failure.STALE, credential,
                            f"unauthorized: the request was signed at {date_time}, not within signature_window_s="
                            f"{self.window_s:g} of the broker's clock (a replay, or a clock that is wrong)")
        return Signed(credential)


class Refusals:
    """Refused calls, counted by Failure (tidemq_auth_failures_total) and logged at WARNING with the
    peer and the access key: at most one line per (failure, peer address, access key) every
    ``interval_s`` (the next one says how many were left out), and at most ``lines_max`` lines per
    interval in all (an attacker trying many keys fills no log)."""

    def __init__(self, interval_s: float = 10.0, lines_max: int = 20, keys_max: int = 4096,
                 now_s: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self.lines_max = lines_max
        self.keys_max = keys_max
        self.now_s = now_s
        self.counts: dict[Failure, int] = {f: 0 for f in Failure}
        self._last: dict[tuple, tuple[float, int]] = {}      # key -> (logged at, left out since)
        self._window = (0.0, 0)                             # (interval start, lines in it)
        self._lock = threading.Lock()                       # refusals come from the admin's threads too

    def refused(self, failure: Failure, peer: str, access_key: str, method: str, text: str) -> None:
        with self._lock:
            self.counts[failure] += 1
            now = self.now_s()
            host = peer.rsplit(":", 1)[0] if peer else "?"
            key = (failure, host, access_key)
            at, left_out = self._last.get(key, (None, 0))
            start, lines = self._window
            if now - start >= self.interval_s:
                start, lines = now, 0
            if (at is not None and now - at < self.interval_s) or lines >= self.lines_max:
                if len(self._last) < self.keys_max or key in self._last:
                    self._last[key] = (at if at is not None else now - self.interval_s, left_out + 1)
                return
            if len(self._last) >= self.keys_max:
                self._last.clear()
            self._last[key] = (now, 0)
            self._window = (start, lines + 1)
        more = f" ({left_out} more like it since the last line)" if left_out else ""
        who = f"access key {access_key!r}" if access_key else "no access key"
        log.warning("refused %s from %s, %s: %s: %s%s", method, peer or "?", who, failure.value, text, more)

    def snapshot(self) -> dict[str, int]:
        return {f.value: n for f, n in self.counts.items()}
