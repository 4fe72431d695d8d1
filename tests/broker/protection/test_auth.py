"""Authenticator against signatures made exactly as the official Python client makes them."""

import pytest

import calendar
import time

from tidemq.broker.protection.auth import Authenticator as _Authenticator
from tidemq.broker.protection.auth import Failure, Refusals, Signed
from tidemq.protocol.signing import sign, signed_metadata

DATE = "20260102T030405Z"
DATE_S = calendar.timegm(time.strptime(DATE, "%Y%m%dT%H%M%SZ"))


def Authenticator(ak, sk, window_s=900.0, now_s=lambda: DATE_S):
    """The broker's authenticator with its clock at DATE (the signatures below are made at DATE)."""
    return _Authenticator.single(ak, sk, window_s, now_s)


def refusal_text(r):
    """None when the call was authenticated, else the text its caller is told."""
    return None if isinstance(r, Signed) else r.text


def client_metadata(ak, sk, date=DATE):
    """The official client's own headers (rocketmq.v5.util.Signature), with its date replaced."""
    from rocketmq.v5.util.signature import Signature

    class Conf:
        class credentials:
            pass
        namespace = ""
    Conf.credentials.ak, Conf.credentials.sk = ak, sk
    md = dict(Signature.metadata(Conf, "client-1"))
    real_date = md["x-mq-date-time"]
    md["x-mq-date-time"] = date
    md["authorization"] = md["authorization"].replace(Signature.sign(sk, real_date), Signature.sign(sk, date))
    return list(md.items())


def test_the_official_clients_signature_is_ours():
    from rocketmq.v5.util.signature import Signature
    assert sign("sk", DATE) == Signature.sign("sk", DATE)
    a = Authenticator("ak", "sk")
    assert refusal_text(a.verify(client_metadata("ak", "sk"))) is None
    assert refusal_text(a.verify(signed_metadata("ak", "sk", DATE))) is None


@pytest.mark.parametrize("md, why", [
    (None, "no authorization header"),
    ([("x-mq-date-time", DATE)], "no authorization header"),
    ([("authorization", "Bearer x")], "must be MQv2-HMAC-SHA1"),
    ("wrong-secret", "unknown access key or wrong signature"),
    ("wrong-ak", "unknown access key or wrong signature"),
    ("empty", "needs Credential and Signature"),
    ("no-date", "needs Credential and Signature"),
])
def test_refusals_say_why(md, why):
    if md == "wrong-secret":
        md = client_metadata("ak", "nope")
    elif md == "wrong-ak":
        md = client_metadata("ak2", "sk")
    elif md == "empty":
        md = client_metadata("", "")
    elif md == "no-date":
        md = [kv for kv in client_metadata("ak", "sk") if kv[0] != "x-mq-date-time"]
    r = refusal_text(Authenticator("ak", "sk").verify(md))
    assert r is not None and r.startswith("unauthorized") and why in r


def test_java_style_upper_case_hex_and_a_scoped_credential_pass():
    md = [("x-mq-date-time", DATE), ("authorization", f"MQv2-HMAC-SHA1 Credential=ak/cn/rmq, "
                                                      f"SignedHeaders=x-mq-date-time, Signature={sign('sk', DATE).upper()}")]
    assert refusal_text(Authenticator("ak", "sk").verify(md)) is None


def test_a_signature_is_bound_to_its_date():
    md = dict(signed_metadata("ak", "sk", DATE))
    md["x-mq-date-time"] = "20260102T030406Z"
    assert refusal_text(Authenticator("ak", "sk").verify(list(md.items()))) is not None


def test_a_stale_or_undated_signature_is_a_replay():
    late = Authenticator("ak", "sk", now_s=lambda: DATE_S + 901)
    r = refusal_text(late.verify(signed_metadata("ak", "sk", DATE)))
    assert r is not None and "signature_window_s=900" in r
    assert refusal_text(Authenticator("ak", "sk", now_s=lambda: DATE_S + 899).verify(signed_metadata("ak", "sk", DATE))) is None
    assert refusal_text(Authenticator("ak", "sk", now_s=lambda: DATE_S - 899).verify(signed_metadata("ak", "sk", DATE))) is None
    for bad in ("not-a-date", "20000101T000000Z"):
        r = refusal_text(Authenticator("ak", "sk").verify(signed_metadata("ak", "sk", bad)))
        assert r is not None and r.startswith("unauthorized"), (bad, r)


def test_local_time_marked_utc_is_accepted_as_the_python_client_sends_it():
    local = time.strftime("%Y%m%dT%H%M%SZ", time.localtime(DATE_S))   # what the Python client writes
    assert refusal_text(Authenticator("ak", "sk").verify(signed_metadata("ak", "sk", local))) is None


@pytest.mark.parametrize("md, failure", [
    (None, Failure.NO_SIGNATURE),
    ([("authorization", "Bearer x")], Failure.MALFORMED),
    ("wrong-secret", Failure.BAD_SIGNATURE),
    ("wrong-ak", Failure.UNKNOWN_KEY),
    ("stale", Failure.STALE),
])
def test_each_refusal_has_its_typed_reason_and_the_caller_learns_nothing_about_keys(md, failure):
    if md == "wrong-secret":
        md = client_metadata("ak", "nope")
    elif md == "wrong-ak":
        md = client_metadata("ak2", "sk")
    elif md == "stale":
        md = signed_metadata("ak", "sk", "20000101T000000Z")
    r = Authenticator("ak", "sk").verify(md)
    assert r.failure is failure
    if failure in (Failure.BAD_SIGNATURE, Failure.UNKNOWN_KEY):
        assert r.text == "unauthorized: unknown access key or wrong signature", "the same words for both"
        assert r.access_key in ("ak", "ak2"), "the log gets the key"


def test_many_users_each_with_their_secret():
    secrets = {"ak": "sk", "app-a": "secret-a"}
    a = _Authenticator(secrets.get, 900.0, lambda: DATE_S)
    assert a.verify(signed_metadata("app-a", "secret-a", DATE)) == Signed("app-a")
    assert a.verify(signed_metadata("ak", "sk", DATE)) == Signed("ak")
    assert a.verify(signed_metadata("app-a", "sk", DATE)).failure is Failure.BAD_SIGNATURE


def test_refusals_are_counted_every_time_and_logged_at_most_once_per_interval(caplog):
    now = [0.0]
    r = Refusals(interval_s=10.0, lines_max=3, now_s=lambda: now[0])
    caplog.set_level("WARNING", logger="tidemq.broker")
    for _ in range(5):
        r.refused(Failure.BAD_SIGNATURE, "ipv4:10.0.0.1:5000", "app-a", "/x/Send", "unauthorized: ...")
    lines = [x for x in caplog.records if "refused" in x.getMessage()]
    assert len(lines) == 1 and "ipv4:10.0.0.1:5000" in lines[0].getMessage() and "'app-a'" in lines[0].getMessage()
    assert r.snapshot()["bad_signature"] == 5
    for k in range(10):                         # many keys: at most lines_max lines per interval in all
        r.refused(Failure.UNKNOWN_KEY, "ipv4:10.0.0.2:5000", f"guess-{k}", "/x/Send", "unauthorized: ...")
    assert len([x for x in caplog.records if "refused" in x.getMessage()]) == 3
    now[0] = 11.0
    r.refused(Failure.BAD_SIGNATURE, "ipv4:10.0.0.1:6000", "app-a", "/x/Send", "unauthorized: ...")
    last = [x for x in caplog.records if "refused" in x.getMessage()][-1].getMessage()
    assert "4 more like it" in last, last
