"""A client's own settings (config.ClientConfig: keys, TLS, a CA to trust, its own certificate) and
what they make: the keywords tidemq.client's Producer / PullConsumer / PopConsumer take, and, when a
broker cannot be reached, what is likely wrong (``explain``: a TLS port reached without TLS, a
certificate without the endpoint's name in its SANs).

    from tidemq.client import Producer
    from tidemq.client.settings import client_settings, connection
    p = Producer("broker-1:8081", **connection(client_settings()))

Where the settings come from, weakest first: the user's file (``$XDG_CONFIG_HOME/tidemq/client.toml``,
by default ``~/.config/tidemq/client.toml``; a ``[client]`` table or top-level keys), the ``[client]``
table of ``config_file``, ``TIDEMQ_CLIENT_*`` variables, then ``overrides`` (a command's flags).
"""

from __future__ import annotations

import os
import socket
import ssl
from typing import Mapping, NamedTuple

import grpc

from ..config import ClientConfig, ConfigError, toml_settings

USER_FILE = os.path.join("tidemq", "client.toml")


class TlsOptions(NamedTuple):
    """How a client speaks TLS: the CA(s) it trusts (None: the system's roots), its own certificate and
    key (a broker that requires one: tls_client_ca_file), the name the broker's certificate must carry
    (None: the endpoint's host)."""
    root_certificates: bytes | None = None
    certificate_chain: bytes | None = None
    private_key: bytes | None = None
    server_name: str | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(root_certificates=self.root_certificates, private_key=self.private_key,
                                            certificate_chain=self.certificate_chain)

    def channel_options(self) -> list:
        return [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []


def tls_options(tls, root_certificates: str | bytes | None = None) -> TlsOptions | None:
    """``tls`` (a bool or TlsOptions) and ``root_certificates`` (a PEM file's path or its bytes) as
    TlsOptions, or None for a plaintext channel."""
    if isinstance(root_certificates, str):
        with open(root_certificates, "rb") as fh:
            root_certificates = fh.read()
    if isinstance(tls, TlsOptions):
        return tls._replace(root_certificates=root_certificates) if root_certificates is not None else tls
    if tls or root_certificates is not None:
        return TlsOptions(root_certificates)
    return None


def user_file(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
    return os.path.join(base, USER_FILE)


def client_settings(config_file: str | None = None, env: Mapping[str, str] | None = None,
                    **overrides) -> ClientConfig:
    """The client's settings (see the module's doc); ConfigError when they cannot be used."""
    base: dict = {}
    path = user_file(env)
    if os.path.isfile(path):
        base.update(toml_settings(path, "client"))
    if config_file:
        base.update(toml_settings(config_file, "client", top_level=False))
    unknown = set(base) - {f for f in ClientConfig.__dataclass_fields__}
    if unknown:
        raise ConfigError(f"[client]: unknown setting(s) {', '.join(sorted(unknown))}")
    return ClientConfig.load(env=env, base=base, **{k: v for k, v in overrides.items() if v is not None})


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as e:
        raise ConfigError(f"{what} {path}: {e.strerror or e}") from None


def connection(cfg: ClientConfig) -> dict:
    """tidemq.client's keywords for these settings: access_key / secret_key (when set), tls (a
    TlsOptions, or False)."""
    out: dict = {}
    if cfg.access_key:
        out.update(access_key=cfg.access_key, secret_key=cfg.secret_key)
    out["tls"] = tls_of(cfg) or False
    return out


def tls_of(cfg: ClientConfig) -> TlsOptions | None:
    if not cfg.tls_enabled:
        return None
    return TlsOptions(_read(cfg.ca_file, "ca_file") if cfg.ca_file else None,
                      _read(cfg.cert_file, "cert_file") if cfg.cert_file else None,
                      _read(cfg.key_file, "key_file") if cfg.key_file else None,
                      cfg.tls_server_name or None)


def speaks_tls(endpoint: str, timeout_s: float = 3.0) -> bool | None:
    """Whether the port answers a TLS handshake (certificates not checked: only what it speaks);
    None when it cannot be reached at all."""
    host, _, port = endpoint.rpartition(":")
    host = host.strip("[]")
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s) as raw:
            try:
                with ctx.wrap_socket(raw, server_hostname=host):
                    return True
            except (ssl.SSLError, ConnectionError, socket.timeout):
                return False
    except (OSError, ValueError):
        return None


def explain(endpoint: str, error: grpc.RpcError, tls: bool) -> str:
    """What is likely wrong when a call to ``endpoint`` failed with ``error`` ("" when nothing more is
    known): a TLS port reached without TLS, a plaintext port reached with it, a certificate that is not
    for the endpoint's host or not signed by a trusted CA."""
    try:
        code, details = error.code(), error.details() or ""
    except Exception:  # noqa: BLE001 - not a call's error
        return ""
    if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return ""
    host = endpoint.rpartition(":")[0].strip("[]")
    low = details.lower()
    if tls and ("hostname verification" in low or "peer name" in low):
        return (f"the broker's certificate is not for {host!r}: its subjectAltName must name it (an address "
                f"needs an IP SAN: subjectAltName=IP:{host}), or give the name it carries (tls_server_name)")
    if tls and ("certificate verify failed" in low or "handshake failed" in low or "ssl" in low):
        if speaks_tls(endpoint) is False:
            return f"the broker at {endpoint} does not speak TLS: drop --tls / ca_file"
        return ("the broker's certificate is not signed by a CA this client trusts: give the CA's PEM file "
                "(--ca-file, [client] ca_file, TIDEMQ_CLIENT_CA_FILE)")
    if not tls and speaks_tls(endpoint):
        return (f"the broker at {endpoint} speaks TLS: use --tls and --ca-file CA.pem (or [client] tls / ca_file, "
                f"TIDEMQ_CLIENT_TLS / TIDEMQ_CLIENT_CA_FILE)")
    return ""
