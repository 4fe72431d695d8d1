"""A client's settings (``[client]``): ClientConfig."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .loading import ConfigError, Loadable
from .loading import setting as _f

@dataclass(frozen=True)
class ClientConfig(Loadable):
    """A client of a running broker: the `tidemq` commands that talk to one (``--endpoint``) and
    tidemq.client (``tidemq.client.settings``). Read from ``~/.config/tidemq/client.toml`` (or
    ``$XDG_CONFIG_HOME/tidemq/client.toml``), then the ``[client]`` table of ``--config FILE``, then
    ``TIDEMQ_CLIENT_*``, then the commands' flags (``--access-key``, ``--secret-key``, ``--tls``,
    ``--ca-file``). Never the broker's private key: a client trusts a CA (``ca_file``), and proves who
    it is with its keys (and, where the broker requires one, its own certificate)."""

    SECTION: ClassVar[str] = "client"
    ENV_INFIX: ClassVar[str] = "CLIENT_"

    access_key: str = _f("", "access key every call is signed with (a user of the broker: `tidemq user create`); "
                             "empty: unsigned (the commands then use the broker's own access_key / secret_key "
                             "when those are set, as on the broker's host)")
    secret_key: str = _f("", "secret key of access_key (keep it in a file only you read, or in "
                             "TIDEMQ_CLIENT_SECRET_KEY)", secret=True)
    tls: bool = _f(False, "speak TLS to the broker (one with tls_cert_file); the certificate is checked against "
                          "ca_file, else the system's roots")
    ca_file: str = _f("", "PEM file of the CA(s) that signed the brokers' certificates (implies tls)")
    cert_file: str = _f("", "PEM certificate (chain) this client shows a broker that requires one "
                            "(tls_client_ca_file); with key_file")
    key_file: str = _f("", "PEM private key of cert_file (this client's own key, never the broker's)")
    tls_server_name: str = _f("", "the name the broker's certificate must carry, when it is not the endpoint's "
                                  "host (a certificate without an IP SAN reached by its address)")

    def __post_init__(self) -> None:
        self._check()
        if bool(self.access_key) != bool(self.secret_key):
            raise ConfigError("client access_key and secret_key go together: set both (signed calls) or neither")
        if bool(self.cert_file) != bool(self.key_file):
            raise ConfigError("client cert_file and key_file go together: set both or neither")

    @property
    def tls_enabled(self) -> bool:
        return self.tls or bool(self.ca_file) or bool(self.cert_file)
