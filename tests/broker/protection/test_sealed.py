"""protection/sealed.py: a secret sealed under the group's key opens only under that key, for that
context, unchanged; replication/state.py's copy refuses secrets in clear on a member with keys."""

import pytest

from tidemq.broker.protection.sealed import Unsealed, open_sealed, seal
from tidemq.broker.replication import state


def test_a_sealed_secret_opens_only_under_its_key_context_and_bytes():
    s = seal("k", "acl user alice", b"alices secret")
    assert "alices" not in s and s != seal("k", "acl user alice", b"alices secret"), "a nonce per value"
    assert open_sealed("k", "acl user alice", s) == b"alices secret"
    raw = bytearray(s.encode())
    raw[20] = ord("A") if raw[20] != ord("A") else ord("B")
    for key, context, value in (("other", "acl user alice", s), ("k", "acl user bob", s),
                                ("k", "acl user alice", raw.decode()), ("k", "acl user alice", "alices secret"),
                                ("k", "acl user alice", None), ("k", "acl user alice", "sealed1:!!")):
        with pytest.raises(Unsealed):
            open_sealed(key, context, value)
    assert open_sealed("k", "", seal("k", "", b"")) == b""


def test_the_state_copys_secrets_are_sealed_and_must_be():
    doc = {"pop": {"secret": "ab" * 32}, "acl": {"users": {"alice": {"secret_key": "s1", "super": False}}}}
    sealed = state._seal({**doc, "pop": dict(doc["pop"])}, "k")
    assert sealed["pop"]["secret"].startswith("sealed1:") and "s1" not in str(sealed["acl"])
    opened = state._open(sealed, "k")
    assert opened["pop"] == doc["pop"] and opened["acl"] == doc["acl"]
    with pytest.raises(Unsealed):
        state._open(doc, "k")                       # in clear, to a member with keys
    with pytest.raises(Unsealed):
        state._open(sealed, None)                   # sealed, to a member without
    with pytest.raises(Unsealed):
        state._open(sealed, "another key")
    assert state._open(doc, None) is doc            # no keys anywhere: as before
