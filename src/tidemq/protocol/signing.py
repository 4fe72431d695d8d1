"""The RocketMQ 5 clients' request signature, ``MQv2-HMAC-SHA1``: what a client computes
(tidemq.client, the CLI) and the broker checks (broker/protection/auth.py).

Every call carries, as the official clients send it (``rocketmq/v5/util/signature.py`` in
rocketmq-python-client 5.1.2)::

    x-mq-date-time: 20250101T120000Z
    authorization:  MQv2-HMAC-SHA1 Credential=<access key>, SignedHeaders=x-mq-date-time,
                    Signature=<hex HMAC-SHA1 of the x-mq-date-time value, keyed with the secret key>

The Python client writes the hex digits in lower case, the Java client in upper case. A
Credential of the form ``ak/region/...`` counts by its first part, as the RocketMQ proxy parses
it. Pure functions: no I/O, no clock (the caller gives the date-time).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import NamedTuple

ALGORITHM = "MQv2-HMAC-SHA1"
DATE_HEADER = "x-mq-date-time"
AUTH_HEADER = "authorization"
DATE_FORMAT = "%Y%m%dT%H%M%SZ"


def sign(secret_key: str, date_time: str) -> str:
    """The clients' signature: hex HMAC-SHA1 of the date-time value keyed with the secret."""
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def date_time(epoch_s: float) -> str:
    """The x-mq-date-time value for a moment (UTC)."""
    return time.strftime(DATE_FORMAT, time.gmtime(epoch_s))


def signed_metadata(access_key: str, secret_key: str, date_time: str) -> list[tuple[str, str]]:
    """Headers as the official clients send them (for tidemq's own clients and tests)."""
    return [(DATE_HEADER, date_time),
            (AUTH_HEADER, f"{ALGORITHM} Credential={access_key}, SignedHeaders={DATE_HEADER}, "
                          f"Signature={sign(secret_key, date_time)}")]


class Authorization(NamedTuple):
    """What an authorization header says: the access key (first part of the Credential) and the
    signature, as sent."""
    credential: str
    signature: str


class SignatureError(ValueError):
    """An authorization header that is not a MQv2-HMAC-SHA1 one (the text says what is wrong)."""


def parse_authorization(header: str) -> Authorization:
    """The Credential and Signature of an authorization header; SignatureError when it has the
    wrong scheme or lacks either."""
    algorithm, _, rest = header.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise SignatureError(f"the authorization scheme must be {ALGORITHM}")
    fields = {}
    for part in rest.split(","):
        k, _, v = part.strip().partition("=")
        fields[k.strip()] = v.strip()
    credential = fields.get("Credential", "").split("/", 1)[0]
    signature = fields.get("Signature", "")
    if not credential or not signature:
        raise SignatureError(f"the authorization header needs Credential and Signature, and {DATE_HEADER}")
    return Authorization(credential, signature)
