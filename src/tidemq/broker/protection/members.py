"""How a member of a broker group reaches another: the channel and the headers every call between
members carries (replication/follower.py: the copy of the log and of the state; replication/forward.py:
the leader port's forwarding to the leader).

A member is a client of the member it calls, with the broker's own settings:

* **signed** with the broker's ``access_key`` / ``secret_key`` (the first super user: the replication
  service is for super users only, protection/access.py), a fresh signature per call (the date is
  signed: one older than signature_window_s is a replay);
* **over TLS** when the broker's port speaks TLS (``tls_cert_file``), trusting ``tls_ca_file`` (else
  ``tls_cert_file`` itself: one self-signed certificate for the whole group) and showing its own
  certificate (``tls_cert_file`` / ``tls_key_file``) to a port that requires client certificates
  (``tls_client_ca_file``). The certificate must name the address the member is called by in its
  subjectAltName (an IP SAN for an address: docs/security.md has the commands).

A member refused by another (wrong keys, an untrusted certificate) says so in one line naming the
member and why (``refusal``), once per cause rather than once per retry.
"""

from __future__ import annotations

import time

import grpc

from ...config import BrokerConfig
from ...protocol.signing import date_time, signed_metadata


class MemberCredentials:
    """The broker's own keys and certificates, as a member calling another member uses them."""

    @staticmethod
    def of(node) -> "MemberCredentials":
        """The credentials of a replication node's broker (a node built without a broker, in a unit
        test: none, a plaintext unsigned channel)."""
        creds = getattr(getattr(node, "broker", None), "member_credentials", None)
        return creds if creds is not None else MemberCredentials(BrokerConfig())

    def __init__(self, config: BrokerConfig) -> None:
        self.keys = (config.access_key, config.secret_key) if config.auth_enabled else None
        self.tls = None
        if config.tls_enabled:
            with open(config.tls_ca_file or config.tls_cert_file, "rb") as f:
                roots = f.read()
            with open(config.tls_cert_file, "rb") as f:
                chain = f.read()
            with open(config.tls_key_file, "rb") as f:
                key = f.read()
            self.tls = grpc.ssl_channel_credentials(root_certificates=roots, private_key=key, certificate_chain=chain)
        self._signed: tuple[int, list] | None = None

    def metadata(self) -> list | None:
        """The signature headers for a call now (None with authentication off); made once a second."""
        if self.keys is None:
            return None
        now = int(time.time())
        signed = self._signed
        if signed is None or signed[0] != now:
            signed = self._signed = (now, signed_metadata(self.keys[0], self.keys[1], date_time(now)))
        return list(signed[1])

    def with_metadata(self, extra=()) -> tuple:
        """``extra`` headers (a forwarded call's own) with this member's signature in place of theirs."""
        own = self.metadata()
        if own is None:
            return tuple(extra)
        names = {k for k, _v in own}
        return tuple((k, v) for k, v in extra if k not in names) + tuple(own)

    def channel(self, endpoint: str, options=()) -> grpc.aio.Channel:
        """An aio channel to another member: TLS when this broker's port speaks it, else plaintext."""
        if self.tls is not None:
            return grpc.aio.secure_channel(endpoint, self.tls, options=list(options))
        return grpc.aio.insecure_channel(endpoint, options=list(options))


def refusal(error: BaseException) -> str | None:
    """What a member's refusal of this member says (wrong keys, not allowed, an untrusted certificate
    or a TLS / plaintext mismatch), or None for another failure (the member is down, a deadline)."""
    code = getattr(error, "code", lambda: None)()
    details = (getattr(error, "details", lambda: "")() or "").strip()
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return f"refused our signature (access_key / secret_key must be the same on every member): {details}"
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return f"refused us (the members' access_key must be a super user): {details}"
    low = details.lower()
    if code == grpc.StatusCode.UNAVAILABLE and any(w in low for w in ("ssl", "handshake", "certificate",
                                                                    "hostname", "tls")):
        return (f"TLS failed ({details}): every member needs TLS on or off alike, a certificate naming its "
                f"address (subjectAltName) signed by tls_ca_file, and one of tls_client_ca_file's where the "
                f"other requires client certificates")
    return None
