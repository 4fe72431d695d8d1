"""The `tidemq` command: a thin click group; each subcommand lives in its own module
and is imported only when it runs, so `tidemq --help` stays instant."""

from __future__ import annotations

import importlib

import click

SUBCOMMANDS = {
    "acl": ("tidemq.cli.acl", "acl", "what users may do: grant, revoke, list (topics, groups, cluster)"),
    "alarms": ("tidemq.cli.alarms", "alarms", "resource alarms and flow control of a running broker; set limits"),
    "archive": ("tidemq.cli.archive", "archive", "copy sealed commit-log segments to Parquet (Spark) for cleanup"),
    "clean": ("tidemq.cli.clean", "clean", "run a running broker's cleanup now (--force) and say what it freed"),
    "config": ("tidemq.cli.config", "config", "settings of a running broker: show, set the run-time ones"),
    "demo": ("tidemq.cli.demo", "demo", "write and read messages through the embedded store"),
    "verify": ("tidemq.cli.verify", "verify", "check a store: segments, CRCs, consume queues, index"),
    "disk": ("tidemq.cli.disk", "disk", "disk usage, flags, cleanup and the forecast of a store"),
    "group": ("tidemq.cli.group", "group", "consumer groups of a running broker: lag per queue, reset offsets"),
    "quota": ("tidemq.cli.quota", "quota", "byte-rate quotas per user, client id or topic: set, list"),
    "query": ("tidemq.cli.query", "query", "find messages by key, id, commit-log offset or queue and time"),
    "receive": ("tidemq.cli.receive", "receive", "print messages of a topic (a group's, or from an offset)"),
    "replication": ("tidemq.cli.replication", "replication", "broker groups: role and lag, failover by hand"),
    "send": ("tidemq.cli.send", "send", "send messages (arguments or stdin lines) to a running broker"),
    "status": ("tidemq.cli.status", "status", "a running broker at a glance; exit 1 while writes are refused"),
    "serve": ("tidemq.cli.serve", "serve", "run the broker (RocketMQ 5 gRPC protocol) over the store"),
    "topic": ("tidemq.cli.topic", "topic", "create, list topics; a topic's queues, groups (status), own settings (config)"),
    "user": ("tidemq.cli.user", "user", "users of a running broker: create, list, delete"),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, name: str):
        spec = SUBCOMMANDS.get(name)
        if spec is None:
            return None
        module, attr, _help = spec
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, SUBCOMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tidemq")
def cli() -> None:
    """tidemq: a durable message broker with a RocketMQ-style store."""


def main() -> None:
    cli(auto_envvar_prefix="TIDEMQ")


if __name__ == "__main__":
    main()
