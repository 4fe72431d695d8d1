"""`tidemq serve`: run the broker (RocketMQ 5 gRPC) over the store."""

from __future__ import annotations

import sys

import click

from .common import config_option, load_store_config, quiet_logs, root_option


@click.command()
@root_option
@config_option
@click.option("--host", default=None, envvar="TIDEMQ_HOST", help="bind address (default 127.0.0.1)")
@click.option("--port", type=int, default=None, envvar="TIDEMQ_PORT", help="port (default 8081; 0: any free)")
@click.option("--metrics-port", type=int, default=None, envvar="TIDEMQ_METRICS_PORT",
              help="HTTP port of /metrics, /healthz, /readyz and the status page (default 8082; 0: off)")
@click.option("--auto-create-topics/--no-auto-create-topics", default=None,
              help="create unknown topics on first use (off by default)")
@click.option("--group", "broker_group", default=None, envvar="TIDEMQ_BROKER_GROUP",
              help="broker group this broker is a member of (replication; default: none)")
@click.option("--role", type=click.Choice(["leader", "follower"]), default=None, envvar="TIDEMQ_BROKER_ROLE",
              help="static role in the group (without a coordinator)")
@click.option("--leader", "leader_endpoint", default=None, envvar="TIDEMQ_LEADER_ENDPOINT",
              help="HOST:PORT of the leader a static follower copies")
@click.option("--leader-port", type=int, default=None, envvar="TIDEMQ_LEADER_PORT",
              help="port served only while this broker leads its group (the group's write endpoint)")
@click.option("--coordinator", default=None, envvar="TIDEMQ_COORDINATOR",
              help="ZooKeeper HOST:PORT[,...][/chroot] electing the group's leader (automatic failover)")
@click.option("-v", "--verbose", is_flag=True)
def serve(root, config_file, host, port, metrics_port, auto_create_topics, broker_group, role, leader_endpoint,
          leader_port, coordinator, verbose) -> None:
    """Start the broker; prints one line when ready; stops cleanly on SIGTERM / Ctrl-C."""
    import asyncio

    from ..config import BrokerConfig, ConfigError, ReplicationConfig
    from ..protocol import stubs  # noqa: F401  (imports the official client package: before logging is set up)
    from ..broker.server import serve as run

    quiet_logs(verbose)
    store_overrides = {} if auto_create_topics is None else {"auto_create_topics": auto_create_topics}
    store_cfg = load_store_config(root, config_file, remembered=False, **store_overrides)
    overrides = {k: v for k, v in (("host", host), ("port", port), ("metrics_port", metrics_port)) if v is not None}
    repl = {k: v for k, v in (("broker_group", broker_group), ("broker_role", role),
                              ("leader_endpoint", leader_endpoint), ("leader_port", leader_port),
                              ("coordinator", coordinator)) if v is not None}
    if repl.get("leader_endpoint") and "broker_role" not in repl:
        repl["broker_role"] = "follower"
    try:
        cfg = BrokerConfig.load(toml_path=config_file, section="broker", **overrides)
        rcfg = ReplicationConfig.load(toml_path=config_file, section="replication", **repl)
    except (ConfigError, OSError) as e:
        raise click.ClickException(str(e)) from e
    check_root(store_cfg.root_dir)
    try:
        asyncio.run(run(store_cfg, cfg, ready=lambda line: print(line, flush=True),
                        progress=lambda line: print(line, file=sys.stderr, flush=True), replication=rcfg))
    except OSError as e:            # a port in use, a root that cannot be opened: one line, exit 1
        text = f"{e.strerror}: {e.filename}" if e.strerror and e.filename else str(e)
        raise click.ClickException(text) from e


def check_root(root: str) -> None:
    """A root that is a file is an error; a new one is said, never made silently."""
    import os
    if os.path.exists(root) and not os.path.isdir(root):
        raise click.ClickException(f"the store root {root} is a file, not a directory (--root / root_dir)")
    if not os.path.exists(root):
        click.echo(f"tidemq: no store at {root}: creating a new one", err=True)
