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


I64_MAX = (1 << 63) - 1      # an offset, a time in ms: what the broker's requests take (protocol/admin.py)


def ascii_int(text: str, digits_max: int, most: int = I64_MAX) -> int | None:
    """``text`` as an int when it is 1 to ``digits_max`` ASCII digits 0-9 and at most ``most``, else
    None (the caller says what it wanted: a CLI error, never a ValueError). str.isdigit takes a
    superscript two, which int() refuses; str.isdecimal other scripts' digits, which int() reads but
    nobody typing an offset means."""
    if 0 < len(text) <= digits_max and text.isascii() and text.isdecimal():
        n = int(text)
        return n if n <= most else None
    return None


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


CLIENT_META = "tidemq.client"        # click context meta: the connection flags given


def _remember(ctx: click.Context, param: click.Parameter, value):
    if value is not None and value is not False:
        ctx.meta.setdefault(CLIENT_META, {})[param.name] = value
    return value


def connection_options(f=None, keys: bool = True):
    """--access-key, --secret-key, --tls, --ca-file (config.ClientConfig's flags; read by admin_call and
    client_options through the click context, so the commands' own arguments do not change);
    ``keys=False``: only --tls and --ca-file (a command whose own --secret-key means something else)."""
    if f is None:
        return lambda g: connection_options(g, keys)
    opts = [
        click.option("--access-key", "access_key", default=None, expose_value=False, callback=_remember,
                     allow_from_autoenv=False, help="access key to sign calls with (or TIDEMQ_CLIENT_ACCESS_KEY, "
                                                    "[client] access_key)"),
        click.option("--secret-key", "secret_key", default=None, expose_value=False, callback=_remember,
                     allow_from_autoenv=False, help="its secret key (better: TIDEMQ_CLIENT_SECRET_KEY or "
                                                    "~/.config/tidemq/client.toml: a flag shows in the process list)"),
        click.option("--tls", "tls", is_flag=True, default=None, expose_value=False, callback=_remember,
                     allow_from_autoenv=False, help="speak TLS to the broker (TIDEMQ_CLIENT_TLS, [client] tls)"),
        click.option("--ca-file", "ca_file", default=None, expose_value=False, callback=_remember,
                     allow_from_autoenv=False, type=click.Path(dir_okay=False),
                     help="PEM of the CA that signed the broker's certificate (implies --tls; "
                          "TIDEMQ_CLIENT_CA_FILE, [client] ca_file)"),
    ]
    if not keys:
        opts = opts[2:]
    for opt in reversed(opts):
        f = opt(f)
    return f


def client_config(config_file: str | None):
    """This command's client settings (client/settings.py: the user's client.toml, [client] of --config,
    TIDEMQ_CLIENT_*, the flags); without client keys, the broker's own access_key / secret_key from
    --config's [broker] or TIDEMQ_ACCESS_KEY / TIDEMQ_SECRET_KEY (the first super user, on the broker's
    host). Never the broker's TLS key: TLS is the client's (--tls, --ca-file)."""
    from ..client.settings import client_settings
    from ..config import BrokerConfig
    from .output import fail
    ctx = click.get_current_context(silent=True)
    flags = dict(ctx.meta.get(CLIENT_META, {})) if ctx is not None else {}
    try:
        cfg = client_settings(config_file, **flags)
    except (ConfigError, OSError) as e:
        fail(f"client settings: {e}", code=2)
    if not cfg.access_key:
        try:
            broker = BrokerConfig.load(toml_path=config_file, section="broker")
        except (ConfigError, OSError):
            broker = None                      # (the broker's own settings are only a fallback for the keys)
        if broker is not None and broker.auth_enabled:
            cfg = cfg.replace(access_key=broker.access_key, secret_key=broker.secret_key)
    return cfg


def client_options(config_file: str | None) -> dict:
    """tidemq.client's keywords (keys, TLS) for this command's client settings (client_config)."""
    from ..client.settings import connection
    from .output import fail
    try:
        return connection(client_config(config_file))
    except (ConfigError, OSError) as e:
        fail(f"client settings: {e}", code=2)


def _endpoint(f):
    return click.option("--endpoint", default="127.0.0.1:8081", show_default=True, envvar="TIDEMQ_ENDPOINT",
                        help="HOST:PORT of a running broker")(f)


def endpoint_option(f):
    """--endpoint HOST:PORT and the connection flags (connection_options)."""
    return _endpoint(connection_options(f))


def fail_call(endpoint: str, e, tls: bool) -> None:
    """Exit 2 with what a failed call says, and what is likely wrong (client.settings.explain)."""
    from ..client.settings import explain
    from .output import fail
    hint = explain(endpoint, e, tls)
    fail(f"broker at {endpoint}: {e.code().name}: {e.details()}" + (f" ({hint})" if hint else ""), code=2)


def admin_call(endpoint: str, method: str, request: dict | None = None, config_file: str | None = None,
               check: bool = True) -> dict:
    """Call the broker's admin service, signed and over TLS as this command's client settings say
    (client_config). A refusal exits 1 with its code and error (FORBIDDEN: what this user may not do,
    or what nobody may); UNAUTHORIZED (who you are) and a broker that cannot be reached exit 2.
    ``check=False``: the answer as it is, refusals included, and a broker that cannot be reached as
    {"ok": False, "code": "UNREACHABLE", "error"} (the cluster-wide views: cli/cluster_admin.py)."""
    import time

    import grpc

    from ..client.admin import call
    from ..client.settings import tls_of
    from ..protocol.signing import date_time, signed_metadata
    from .output import fail
    cfg = client_config(config_file)
    try:
        tls = tls_of(cfg)
    except ConfigError as e:
        fail(f"client settings: {e}", code=2)
    md = signed_metadata(cfg.access_key, cfg.secret_key, date_time(time.time())) if cfg.access_key else None
    try:
        r = call(endpoint, method, request, metadata=md, tls=tls or False)
    except grpc.RpcError as e:
        if not check:
            return {"ok": False, "code": "UNREACHABLE", "error": f"broker at {endpoint}: {e.code().name}: {e.details()}"}
        fail_call(endpoint, e, tls is not None)
    if not check:
        return r
    if not r.get("ok"):
        code = r.get("code")
        if code == "UNAUTHORIZED":
            fail(f"broker at {endpoint}: {code}: {r.get('error', '')}", code=2)
        if code == "FORBIDDEN":
            fail(f"broker at {endpoint}: {code}: {r.get('error', '')}")
        fail(r.get("error", "refused"))
    return r
