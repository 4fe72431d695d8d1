"""Options and helpers shared by subcommands."""

from __future__ import annotations

import logging
import os

import click

from ..config import ConfigError, StoreConfig

root_option = click.option("--root", "root", default=None, envvar="TIDEMQ_ROOT_DIR",
                           help="store root directory (default ./data)")
config_option = click.option("--config", "config_file", default=None, type=click.Path(dir_okay=False),
                             envvar="TIDEMQ_CONFIG", help="TOML file with settings")


def load_store_config(root: str | None, config_file: str | None, remembered: bool = True,
                      **overrides) -> StoreConfig:
    """The store's settings from the configuration file, TIDEMQ_* and ``overrides``; for commands
    on a stopped store (``remembered``) over those it remembers from its last start
    (``<root>/config/store.json``, so ``--root`` alone is enough). The broker itself runs with
    what its configuration says, nothing else."""
    from ..store.remembered import recall
    if root is not None:
        overrides["root_dir"] = root
    try:
        base = {}
        if remembered:
            base = recall(root or StoreConfig.load(toml_path=config_file, section="store").root_dir)
        return StoreConfig.load(toml_path=config_file, section="store", base=base, **overrides)
    except (ConfigError, OSError) as e:
        raise click.ClickException(str(e)) from e


def existing_root(root: str) -> None:
    """Exit 2 in one line unless ``root`` is the root of a store: commands on a stopped store never
    make one (a mistyped --root would become an empty store that verifies "OK"); `serve` does."""
    from ..layout import root_problem
    from .output import fail
    problem = root_problem(root)
    if problem is not None:
        made_by_serve = "" if os.path.isfile(root) else "; `tidemq serve` makes a new store"
        fail(f"{problem} (--root / root_dir{made_by_serve})", code=2)


def open_store(root: str | None, config_file: str | None, locked_hint: str = ""):
    """Start the store of an existing directory, or exit 2 with a clear message (no store there,
    held by a broker, unreadable)."""
    from ..io import LockedError
    from ..store import MessageStore, StoreError
    from .output import fail

    cfg = load_store_config(root, config_file)
    existing_root(cfg.root_dir)
    try:
        return MessageStore(cfg).start()
    except LockedError as e:
        fail(f"{e}{locked_hint}", code=2)
    except (StoreError, OSError) as e:
        fail(f"cannot open the store at {cfg.root_dir}: {e}", code=2)


def quiet_logs(verbose: bool = False) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def client_options(config_file: str | None) -> dict:
    """access_key / secret_key / root_certificates for tidemq.client from the broker settings
    (TIDEMQ_* or the TOML file's [broker] section), as `alarms` and `topic --endpoint` sign."""
    from ..config import BrokerConfig
    from .output import fail
    try:
        cfg = BrokerConfig.load(toml_path=config_file, section="broker")
    except (ConfigError, OSError) as e:
        fail(f"broker settings: {e}", code=2)
    out: dict = {}
    if cfg.auth_enabled:
        out.update(access_key=cfg.access_key, secret_key=cfg.secret_key)
    if cfg.tls_enabled:
        out["root_certificates"] = cfg.tls_cert_file
    return out


endpoint_option = click.option("--endpoint", default="127.0.0.1:8081", show_default=True, envvar="TIDEMQ_ENDPOINT",
                               help="HOST:PORT of a running broker")


def admin_call(endpoint: str, method: str, request: dict | None = None, config_file: str | None = None) -> dict:
    """Call the broker's admin service; signed and over TLS when the broker settings (TIDEMQ_* or the
    TOML file's [broker] section) say so: the TLS certificate is the one trusted."""
    import time

    import grpc

    from ..config import BrokerConfig, ConfigError
    from ..client.admin import call
    from ..protocol.signing import date_time, signed_metadata
    from .output import fail
    try:
        cfg = BrokerConfig.load(toml_path=config_file, section="broker")
        roots = None
        if cfg.tls_enabled:
            with open(cfg.tls_cert_file, "rb") as f:
                roots = f.read()
    except (ConfigError, OSError) as e:
        fail(f"broker settings: {e}", code=2)
    md = None
    if cfg.auth_enabled:
        md = signed_metadata(cfg.access_key, cfg.secret_key, date_time(time.time()))
    try:
        r = call(endpoint, method, request, metadata=md, root_certificates=roots)
    except grpc.RpcError as e:
        fail(f"broker at {endpoint}: {e.code().name}: {e.details()}", code=2)
    if not r.get("ok"):
        fail(r.get("error", "refused"))
    return r
