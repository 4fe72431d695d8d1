"""`tidemq replication`: a broker's place in its group, and failover by hand (groups without a
coordinator; with one, ZooKeeper elects the leader).

    tidemq replication status  [--endpoint H:P] [--json]   role, epoch, leader, followers' lag / own copy
    tidemq replication promote --endpoint F [--followers A,B]
                                                           F leads (epoch + 1); A, B follow it (each cuts what
                                                           its log has that F's has not)
    tidemq replication follow  --endpoint A --leader F     A follows F

Exit 1 when the broker refuses (it is in no group, a coordinator decides), 2 when it cannot be asked.
"""

from __future__ import annotations

import click

from .common import config_option, endpoint_option, quiet_logs
from .output import emit_json, fail, out


@click.group()
def replication() -> None:
    """Broker groups: a broker's role and lag; manual failover without a coordinator."""


@replication.command("status")
@endpoint_option
@config_option
@click.option("--json", "as_json", is_flag=True)
def status(endpoint, config_file, as_json) -> None:
    """This broker's role, epoch and leader; a leader's followers with their lag; a follower's copy."""
    from .status import print_replication
    from .common import admin_call
    quiet_logs()
    rep = admin_call(endpoint, "Replication", config_file=config_file)["replication"]
    if as_json:
        emit_json(rep)
    elif rep is None:
        out.print("this broker is in no broker group (one broker, no replication)")
    else:
        print_replication(rep)


@replication.command("promote")
@endpoint_option
@config_option
@click.option("--followers", default="", help="HOST:PORT,... of the other members: each then follows the new leader")
def promote(endpoint, config_file, followers) -> None:
    """Make the broker at --endpoint the leader of its group (a new epoch), then the --followers follow it."""
    from .common import admin_call
    quiet_logs()
    r = admin_call(endpoint, "Promote", config_file=config_file)
    out.print(f"{endpoint} leads, epoch {r['epoch']}")
    for f in (x.strip() for x in followers.split(",") if x.strip()):
        admin_call(f, "Follow", {"leader": endpoint}, config_file)
        out.print(f"{f} follows {endpoint}")


@replication.command("follow")
@endpoint_option
@config_option
@click.option("--leader", required=True, help="HOST:PORT of the leader to follow")
def follow(endpoint, config_file, leader) -> None:
    """Make the broker at --endpoint follow --leader (it first cuts what diverged)."""
    from .common import admin_call
    quiet_logs()
    if leader == endpoint:
        fail("a broker cannot follow itself")
    admin_call(endpoint, "Follow", {"leader": leader}, config_file)
    out.print(f"{endpoint} follows {leader}")
