"""The MQv2-HMAC-SHA1 headers: their shape, the date format, the authorization header's parts
(the broker's checks against the official client's own signatures: tests/broker/protection)."""

import pytest

from tidemq.protocol.signing import (ALGORITHM, AUTH_HEADER, DATE_HEADER, SignatureError, date_time,
                                     parse_authorization, sign, signed_metadata)


def test_signed_metadata_is_what_the_clients_send():
    md = dict(signed_metadata("ak", "sk", "20260102T030405Z"))
    assert md[DATE_HEADER] == "20260102T030405Z"
    assert md[AUTH_HEADER] == (f"{ALGORITHM} Credential=ak, SignedHeaders={DATE_HEADER}, "
                               f"Signature={sign('sk', '20260102T030405Z')}")
    assert parse_authorization(md[AUTH_HEADER]) == ("ak", sign("sk", "20260102T030405Z"))
    assert date_time(1767323045) == "20260102T030405Z"


def test_a_scoped_credential_counts_by_its_first_part():
    assert parse_authorization(f"{ALGORITHM} Credential=ak/cn/rmq, Signature=AB12").credential == "ak"


@pytest.mark.parametrize("header", ["Bearer x", f"{ALGORITHM} Credential=ak", f"{ALGORITHM} Signature=ab",
                                    f"{ALGORITHM} Credential=, Signature=ab", ""])
def test_headers_without_the_scheme_or_its_parts_are_refused(header):
    with pytest.raises(SignatureError):
        parse_authorization(header)
