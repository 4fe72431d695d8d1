"""Secrets sealed under the cluster's key for the way between members (replication/state.py's copy).

A follower copies its leader's state, and with it secrets: every user's ``secret_key`` (the ACL,
protection/acl.py) and the key receipt handles are signed with (protection/handle_key.py). The member
channel is TLS only when the ports speak TLS; before, with authentication on and TLS off, these went
in clear over it: whoever could read the network learnt every user's secret key. With authentication
on, they are now **sealed** under the group's ``secret_key`` (the same on every member, never sent):
encrypted and authenticated, bound to what they are (``context``: which user's key, or the handle
key) so that a sealed value cannot be moved to another place of the document.

Sealing rather than refusing the copy without TLS: a follower that did not copy the users and the
handle key would, once promoted, refuse every user but the broker's own and every receipt handle
given out before (a failover would lock every application out); sealing keeps a failover whole over
either channel, and it also proves the secrets come from a member holding the key (a forged user
planted by whoever sits on a plaintext channel does not open). Over TLS they are sealed all the same
(one way for both; TLS may end before the member).

The construction, from the standard library (no cipher in it; no new dependency for a few hundred
bytes a second): two keys derived from ``secret_key`` by HMAC-SHA256 with distinct labels; a random
16-byte nonce per value; the keystream HMAC-SHA256(enc key, nonce || block counter) (a PRF in counter
mode) XORed with the plaintext; then encrypt-then-MAC: HMAC-SHA256(mac key, context || nonce ||
ciphertext), checked in constant time before anything is decrypted::

    "sealed1:" base64url(nonce 16 | ciphertext | tag 32)
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import os

PREFIX = "sealed1:"
NONCE_BYTES = 16
TAG_BYTES = 32
PLAIN_BYTES_MAX = 1 << 16          # a secret key is at most a few hundred bytes (acl.SECRET_BYTES_MAX)


class Unsealed(ValueError):
    """A value that is not sealed, or does not open under this key and context."""


@functools.lru_cache(maxsize=4)
def _keys(secret_key: str) -> tuple[bytes, bytes]:
    k = secret_key.encode()
    return (hmac.new(k, b"tidemq sealed secrets v1 enc", hashlib.sha256).digest(),
            hmac.new(k, b"tidemq sealed secrets v1 mac", hashlib.sha256).digest())


@functools.lru_cache(maxsize=8)
def derived_key(secret_key: str, label: bytes) -> bytes:
    """A key for one purpose, derived from ``secret_key`` by HMAC-SHA256 under ``label`` (distinct per
    purpose: the state answer's MAC, replication/state.py, has its own)."""
    return hmac.new(secret_key.encode(), label, hashlib.sha256).digest()


def _stream(key: bytes, nonce: bytes, n: int) -> bytes:
    out = bytearray()
    block = 0
    while len(out) < n:
        out += hmac.new(key, nonce + block.to_bytes(8, "big"), hashlib.sha256).digest()
        block += 1
    return bytes(out[:n])


def _tag(key: bytes, context: str, nonce: bytes, ct: bytes) -> bytes:
    c = context.encode()
    return hmac.new(key, len(c).to_bytes(4, "big") + c + nonce + ct, hashlib.sha256).digest()


def seal(secret_key: str, context: str, plain: bytes) -> str:
    if len(plain) > PLAIN_BYTES_MAX:
        raise ValueError(f"a sealed secret is at most {PLAIN_BYTES_MAX} bytes")
    enc, mac = _keys(secret_key)
    nonce = os.urandom(NONCE_BYTES)
    ct = bytes(a ^ b for a, b in zip(plain, _stream(enc, nonce, len(plain))))
    return PREFIX + base64.urlsafe_b64encode(nonce + ct + _tag(mac, context, nonce, ct)).decode()


def open_sealed(secret_key: str, context: str, sealed) -> bytes:
    """The plaintext of ``sealed``; Unsealed when it is not sealed, or not under this key and context."""
    if not isinstance(sealed, str) or not sealed.startswith(PREFIX):
        raise Unsealed(f"{context}: not sealed")
    try:
        raw = base64.urlsafe_b64decode(sealed[len(PREFIX):].encode())
    except ValueError:
        raise Unsealed(f"{context}: not sealed") from None
    if not NONCE_BYTES + TAG_BYTES <= len(raw) <= NONCE_BYTES + TAG_BYTES + PLAIN_BYTES_MAX:
        raise Unsealed(f"{context}: not sealed")
    enc, mac = _keys(secret_key)
    nonce, ct, tag = raw[:NONCE_BYTES], raw[NONCE_BYTES:-TAG_BYTES], raw[-TAG_BYTES:]
    if not hmac.compare_digest(tag, _tag(mac, context, nonce, ct)):
        raise Unsealed(f"{context}: does not open under this member's secret_key (another key, or changed)")
    return bytes(a ^ b for a, b in zip(ct, _stream(enc, nonce, len(ct))))
