"""`tidemq serve`: run the broker (RocketMQ 5 gRPC) over the store."""

from __future__ import annotations

import logging
import os

import click

from .common import ascii_int, config_option, load_store_config, quiet_logs, root_option


@click.command()
@root_option
@config_option
@click.option("--host", default=None, envvar="TIDEMQ_HOST", help="bind address (default 127.0.0.1)")
@click.option("--port", type=int, default=None, envvar="TIDEMQ_PORT", help="port (default 8081; 0: any free)")
@click.option("--metrics-port", type=int, default=None, envvar="TIDEMQ_METRICS_PORT",
              help="HTTP port of /metrics, /healthz, /readyz and the status page (default 8082; 0: off)")
@click.option("--metrics-host", default=None, envvar="TIDEMQ_METRICS_HOST",
              help="address the metrics port binds (default 127.0.0.1, whatever --host)")
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
              help="ZooKeeper [digest:USER@]HOST:PORT[,...][/chroot] electing the group's leader (automatic "
                   "failover); USER's password: TIDEMQ_COORDINATOR_PASSWORD")
@click.option("--processes", type=int, default=None,
              help="broker processes on this machine, one cluster to clients (default 1; bench/README.md 32.4)")
@click.option("--member", default=None, hidden=True, help="I/N/PID: member I of a `serve --processes N` whose parent is PID")
@click.option("-v", "--verbose", is_flag=True)
def serve(root, config_file, host, port, metrics_port, metrics_host, auto_create_topics, broker_group, role,
          leader_endpoint, leader_port, coordinator, processes, member, verbose) -> None:
    """Start the broker; prints one line when ready; stops cleanly on SIGTERM / Ctrl-C."""
    from ..config import BrokerConfig, ConfigError, ReplicationConfig
    from ..io import LockedError
    # gRPC's core logs each failed TLS handshake (a plaintext client on a TLS port: ~20 lines a second,
    # without the peer) at INFO: only its errors unless the operator asks (GRPC_VERBOSITY=INFO); before
    # gRPC is first imported
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    from ..broker.server import event_loop_runner, serve as run

    quiet_logs(verbose)
    logging.getLogger("tidemq.audit").setLevel(logging.INFO)    # every admin change, whatever the verbosity
    store_overrides = {} if auto_create_topics is None else {"auto_create_topics": auto_create_topics}
    store_cfg = load_store_config(root, config_file, remembered=False, **store_overrides)
    overrides = {k: v for k, v in (("host", host), ("port", port), ("metrics_port", metrics_port),
                                   ("metrics_host", metrics_host), ("processes", processes)) if v is not None}
    repl = {k: v for k, v in (("broker_group", broker_group), ("broker_role", role),
                              ("leader_endpoint", leader_endpoint), ("leader_port", leader_port),
                              ("coordinator", coordinator)) if v is not None}
    if repl.get("leader_endpoint") and "broker_role" not in repl:
        repl["broker_role"] = "follower"
    try:
        cfg = BrokerConfig.load(toml_path=config_file, section="broker", **overrides)
        rcfg = ReplicationConfig.load(toml_path=config_file, section="replication", **repl)
        if role is not None and not rcfg.broker_group:     # (leader is the default: only the flag tells)
            raise ConfigError(f"--role {role} only means something in a broker group: give --group NAME, or "
                              f"leave it out for one broker without replication")
        runner = event_loop_runner(cfg.event_loop)
    except (ConfigError, OSError) as e:
        raise click.ClickException(str(e)) from e
    if cfg.log_level:
        logging.getLogger("tidemq").setLevel(cfg.log_level)
    if cfg.processes > 1 and member is None:
        if rcfg.enabled:
            raise click.ClickException("--processes N and a broker group (replication) do not go together yet")
        raise SystemExit(serve_processes(store_cfg.root_dir, cfg, config_file, auto_create_topics, verbose))
    check_root(store_cfg.root_dir)
    if member is not None:
        run = member_runner(member, store_cfg.root_dir, cfg)
    said = StartReporter()
    try:
        runner(run(store_cfg, cfg, ready=said.ready, progress=said.progress, progress_interval_s=said.interval_s,
                   replication=rcfg))
    except LockedError as e:        # another broker (or a command) has the store open
        raise click.ClickException(f"{e} (another broker on this root? stop it, or give another --root)") from e
    except OSError as e:            # a port in use, a root that cannot be opened: one line, exit 1
        text = f"{e.strerror}: {e.filename}" if e.strerror and e.filename else str(e)
        if e.filename and str(e.filename).startswith(str(store_cfg.root_dir)):
            text = f"cannot use the store at {store_cfg.root_dir}: {text}"
        raise click.ClickException(text) from e
    finally:
        said.stop()


def serve_processes(root: str, cfg, config_file, auto_create_topics, verbose) -> int:
    """`serve --processes N` (N > 1): the parent of N members (broker/multi/supervisor.py); its exit code."""
    from ..broker.multi.siblings import MultiError
    from ..broker.multi.supervisor import Supervisor
    args = ["--host", cfg.host, "--metrics-host", cfg.metrics_host]
    if config_file:
        args += ["--config", config_file]
    if auto_create_topics is not None:
        args.append("--auto-create-topics" if auto_create_topics else "--no-auto-create-topics")
    if verbose:
        args.append("-v")
    host = cfg.advertised_endpoint.rpartition(":")[0] or cfg.host
    try:
        sup = Supervisor(root, cfg.processes, host, cfg.port, cfg.metrics_port, args,
                         say=lambda s: print(s, flush=True))
        return sup.run()
    except MultiError as e:
        raise click.ClickException(str(e)) from e


def member_runner(member: str, root: str, cfg):
    """The coroutine function a member runs (broker/multi/member.py), given --member I/N."""
    from ..broker.multi.member import die_with_parent, serve_member
    from ..broker.multi.siblings import Siblings
    try:
        parts = [ascii_int(x, 10) for x in member.split("/")]
        if len(parts) != 3 or None in parts:
            raise ValueError("give I/N/PID in ASCII digits")
        i, n, parent = parts
        siblings = Siblings(os.path.dirname(os.path.abspath(root)), i, n, cfg.broker_name)
    except ValueError as e:
        raise click.ClickException(f"--member {member!r}: {e}") from e
    die_with_parent(parent)

    def run(store_cfg, cfg, ready=print, progress=None, progress_interval_s=None, replication=None):
        return serve_member(store_cfg, cfg, siblings, ready, progress, progress_interval_s)
    return run


class StartReporter:
    """How a long start (a recovery) is said: on a terminal, one line of rich's redrawn in place
    four times a second (what it does and how far, as `verify` shows its walk); elsewhere (a log,
    a pipe) a plain line every few seconds. The ready line goes to stdout either way."""

    def __init__(self, console=None) -> None:
        from .output import err
        self.console = console or err
        self.live = self.console.is_terminal
        self.interval_s = 0.25 if self.live else None      # None: the broker's START_PROGRESS_S
        self._status = None

    def progress(self, line: str) -> None:
        if not self.live:
            print(line, file=self.console.file, flush=True)
            return
        from rich.console import Group
        text = Group(line)      # a renderable, not text: the spinner sets it in a grid, wrapped, never cut
                                # (how far the start got is at the end of the line)
        if self._status is None:
            self._status = self.console.status(text, spinner="line")
            self._status.start()
        else:
            self._status.update(text)

    def ready(self, line: str) -> None:
        self.stop()
        print(line, flush=True)

    def stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


def check_root(root: str) -> None:
    """A root that is a file is an error; a new store is said, never made silently."""
    import os

    from ..layout import root_problem
    problem = root_problem(root)
    if problem is None:
        return
    if os.path.exists(root) and not os.path.isdir(root):
        raise click.ClickException(f"{problem} (--root / root_dir)")
    if not os.path.exists(root):
        click.echo(f"tidemq: no store at {root}: creating a new one", err=True)
    elif os.listdir(root):
        click.echo(f"tidemq: {root} holds no store: creating a new one in it", err=True)
    else:
        click.echo(f"tidemq: {root} is empty: creating a new store in it", err=True)
