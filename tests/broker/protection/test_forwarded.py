"""The forwarded-for headers (protection/forwarded.py): taken only when a member signed them, fresh,
for the call's own authorization header; anything else is ignored (the call's own peer counts)."""

from tidemq.broker.protection.forwarded import (
    FOR_HEADER,
    SIGN_HEADER,
    ForwardedFor,
    forwarded_headers,
    unsigned_peer,
)

SK = "members-secret"
AUTH = ("authorization", "MQv2-HMAC-SHA1 Credential=app, SignedHeaders=x-mq-date-time, Signature=ab")


def test_a_members_headers_are_taken():
    f = ForwardedFor(SK, 900, now_s=lambda: 1000.0)
    h = forwarded_headers(SK, "ipv4:10.0.0.7:5123", [AUTH], now_s=1000)
    assert f.peer([AUTH, *h]) == "ipv4:10.0.0.7:5123"
    assert f.peer([AUTH]) is None and f.ignored == 0


def test_anything_a_member_did_not_sign_is_ignored():
    f = ForwardedFor(SK, 900, now_s=lambda: 1000.0)
    h = forwarded_headers(SK, "ipv4:10.0.0.7:5123", [AUTH], now_s=1000)
    other_auth = ("authorization", AUTH[1].replace("ab", "cd"))
    assert f.peer([other_auth, *h]) is None, "bound to the call's own signature"
    assert f.peer([AUTH, *forwarded_headers("not-the-groups", "ipv4:10.0.0.7:5123", [AUTH], now_s=1000)]) is None
    assert f.peer([AUTH, (FOR_HEADER, "ipv4:10.0.0.7:5123")]) is None, "no signature"
    assert f.peer([AUTH, (FOR_HEADER, "ipv4:10.0.0.8:5123"), h[1]]) is None, "another address"
    assert f.peer([AUTH, (SIGN_HEADER, "x y"), (FOR_HEADER, "ipv4:1.2.3.4:1")]) is None
    assert f.peer([AUTH, *h, (FOR_HEADER, "ipv4:10.0.0.9:1")]) is None, "said twice"
    assert f.peer([AUTH, (FOR_HEADER, b"ipv4:1.2.3.4:1"), h[1]]) is None
    stale = ForwardedFor(SK, 900, now_s=lambda: 1000.0 + 901)
    assert stale.peer([AUTH, *h]) is None, "older than signature_window_s: a replay"
    assert f.ignored == 7 and stale.ignored == 1


def test_without_keys_the_address_alone_which_a_broker_with_keys_ignores():
    assert forwarded_headers(None, "ipv4:10.0.0.7:5123", [AUTH]) == ((FOR_HEADER, "ipv4:10.0.0.7:5123"),)
    assert unsigned_peer([AUTH, (FOR_HEADER, "ipv4:10.0.0.7:5123")]) == "ipv4:10.0.0.7:5123"
    assert unsigned_peer([(FOR_HEADER, "nonsense")]) is None and unsigned_peer([AUTH]) is None
    f = ForwardedFor(SK, 900, now_s=lambda: 1000.0)
    assert f.peer([AUTH, *forwarded_headers(None, "ipv4:10.0.0.7:5123", [AUTH])]) is None


def test_no_headers_for_a_peer_that_is_not_an_address():
    assert forwarded_headers(SK, "unix:/tmp/s", [AUTH]) == ()
    assert forwarded_headers(SK, "ipv4:" + "1" * 200, [AUTH]) == ()
