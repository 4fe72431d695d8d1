"""The address a forwarded call comes from: a follower's leader port forwards each call to the leader
(replication/forward.py) over its own connection, so the leader's gRPC peer for it is the follower.
Everything that judges a caller by its address (a policy's source addresses, acl.py; the send path's
per-connection bounds, flow.py; the refusal log, auth.py) must see the client's instead.

The follower says whose call it forwards in two headers:

    x-tidemq-forwarded-for:   the client's gRPC peer, as the follower saw it ("ipv4:10.0.0.7:51234")
    x-tidemq-forwarded-sign:  "<unix seconds> <hex HMAC-SHA256>" of (the seconds, that peer, the
                              call's own authorization header), keyed with the broker's secret_key

The broker's ``secret_key`` is the same on every member (the members sign their calls to each other
with it: members.py) and never leaves them, so only a member can make the second header. The leader
(``ForwardedFor.peer``) takes the first only when the second is right and fresh (within
``signature_window_s`` of its clock); otherwise -- a client sending the headers itself, to the leader or
through a follower (which drops a client's own before adding its own) -- the headers are ignored: the
call is judged by the address it came from. The signature covers the client's authorization header,
so a pair seen once cannot be put on another user's call.

With authentication off there are no keys and nothing to protect from the callers (anyone may do
anything; the broker listens on loopback unless told otherwise: docs/security.md): the follower sends
the first header alone, and the bounds on open streams (streams.py) take it as it is (``unsigned_peer``),
so that the clients of a follower are not counted as one connection. The send path's per-connection
bounds (flow.py, a hot path) see the follower then.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Callable, Iterable

from ...protocol.signing import AUTH_HEADER

FOR_HEADER = "x-tidemq-forwarded-for"
SIGN_HEADER = "x-tidemq-forwarded-sign"
HEADERS = (FOR_HEADER, SIGN_HEADER)
PEER_BYTES_MAX = 128            # "ipv6:[...%zone]:port" fits; anything longer is not a peer


def _mac(secret_key: str, at_s: int, peer: str, authorization: str) -> str:
    msg = b"tidemq-forwarded-for\0%d\0%s\0%s" % (at_s, peer.encode(), authorization.encode())
    return hmac.new(secret_key.encode(), msg, hashlib.sha256).hexdigest()


def _plausible(peer: str) -> bool:
    kind, _, rest = peer.partition(":")
    return 0 < len(peer) <= PEER_BYTES_MAX and kind in ("ipv4", "ipv6") and rest.isprintable() and " " not in rest


def forwarded_headers(secret_key: str | None, peer: str, metadata: Iterable[tuple[str, object]],
                      now_s: float | None = None) -> tuple:
    """The follower's side: the headers saying the call with ``metadata`` came from ``peer`` (the
    address alone without a secret key: authentication off; none for a peer that is not an address)."""
    if not _plausible(peer or ""):
        return ()
    if not secret_key:
        return ((FOR_HEADER, peer),)
    auth = next((v for k, v in metadata if k == AUTH_HEADER and isinstance(v, str)), "")
    at_s = int(time.time() if now_s is None else now_s)
    return ((FOR_HEADER, peer), (SIGN_HEADER, f"{at_s} {_mac(secret_key, at_s, peer, auth)}"))


def unsigned_peer(metadata: Iterable[tuple[str, object]] | None) -> str | None:
    """With authentication off only: the forwarded-for address as it is (see above), or None."""
    for k, v in metadata or ():
        if k == FOR_HEADER:
            return v if isinstance(v, str) and _plausible(v) else None
    return None


class ForwardedFor:
    """The leader's side: the client's peer of a call a member forwarded, or None."""

    def __init__(self, secret_key: str, window_s: float, now_s: Callable[[], float] = time.time) -> None:
        self.secret_key = secret_key
        self.window_s = window_s
        self.now_s = now_s
        self.ignored = 0                # calls with the headers, not made by a member (or stale): ignored

    def peer(self, metadata: Iterable[tuple[str, object]] | None) -> str | None:
        peer = sign = None
        auth = ""
        for k, v in metadata or ():
            if k == FOR_HEADER:
                if peer is not None:
                    self.ignored += 1
                    return None                  # said twice: not one member's
                peer = v
            elif k == SIGN_HEADER:
                sign = v
            elif k == AUTH_HEADER and isinstance(v, str):
                auth = v
        if peer is None and sign is None:
            return None
        if not (isinstance(peer, str) and isinstance(sign, str) and _plausible(peer)):
            self.ignored += 1
            return None
        at, _, mac = sign.partition(" ")
        try:
            at_s = int(at)
        except ValueError:
            self.ignored += 1
            return None
        good = hmac.compare_digest(mac.encode(), _mac(self.secret_key, at_s, peer, auth).encode())
        if not good or abs(self.now_s() - at_s) > self.window_s:
            self.ignored += 1
            return None
        return peer
