"""Authenticator against signatures made exactly as the official Python client makes them."""

import pytest

import calendar
import time

from tidemq.broker.protection.auth import Authenticator as _Authenticator
from tidemq.protocol.signing import sign, signed_metadata

DATE = "20260102T030405Z"
DATE_S = calendar.timegm(time.strptime(DATE, "%Y%m%dT%H%M%SZ"))


def Authenticator(ak, sk, window_s=900.0, now_s=lambda: DATE_S):
    """The broker's authenticator with its clock at DATE (the signatures below are made at DATE)."""
    return _Authenticator(ak, sk, window_s, now_s)


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
    assert a.verify(client_metadata("ak", "sk")) is None
    assert a.verify(signed_metadata("ak", "sk", DATE)) is None


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
    r = Authenticator("ak", "sk").verify(md)
    assert r is not None and r.startswith("unauthorized") and why in r


def test_java_style_upper_case_hex_and_a_scoped_credential_pass():
    md = [("x-mq-date-time", DATE), ("authorization", f"MQv2-HMAC-SHA1 Credential=ak/cn/rmq, "
                                                      f"SignedHeaders=x-mq-date-time, Signature={sign('sk', DATE).upper()}")]
    assert Authenticator("ak", "sk").verify(md) is None


def test_a_signature_is_bound_to_its_date():
    md = dict(signed_metadata("ak", "sk", DATE))
    md["x-mq-date-time"] = "20260102T030406Z"
    assert Authenticator("ak", "sk").verify(list(md.items())) is not None


def test_a_stale_or_undated_signature_is_a_replay():
    late = Authenticator("ak", "sk", now_s=lambda: DATE_S + 901)
    r = late.verify(signed_metadata("ak", "sk", DATE))
    assert r is not None and "signature_window_s=900" in r
    assert Authenticator("ak", "sk", now_s=lambda: DATE_S + 899).verify(signed_metadata("ak", "sk", DATE)) is None
    assert Authenticator("ak", "sk", now_s=lambda: DATE_S - 899).verify(signed_metadata("ak", "sk", DATE)) is None
    for bad in ("not-a-date", "20000101T000000Z"):
        r = Authenticator("ak", "sk").verify(signed_metadata("ak", "sk", bad))
        assert r is not None and r.startswith("unauthorized"), (bad, r)


def test_local_time_marked_utc_is_accepted_as_the_python_client_sends_it():
    local = time.strftime("%Y%m%dT%H%M%SZ", time.localtime(DATE_S))   # what the Python client writes
    assert Authenticator("ak", "sk").verify(signed_metadata("ak", "sk", local)) is None
