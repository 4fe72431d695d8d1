"""One member of ``tidemq serve --processes N``: a broker over its own store, answering routes for
the whole cluster (siblings.py). Started by the parent (supervisor.py), never by an operator.

The member dies with its parent: PR_SET_PDEATHSIG asks the kernel for a SIGTERM when the parent
goes (even by kill -9), and a parent already gone when it was set ends the member at once, so no
member outlives its parent.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import signal

from ...config import BrokerConfig, StoreConfig
from ..server import Broker, run_until_stopped
from .siblings import Siblings

log = logging.getLogger("tidemq.broker")

PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """SIGTERM to this process when its parent dies; exit now if it is gone already."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):       # not Linux: the parent's stop is then the only way
        log.warning("cannot ask to die with the parent (prctl): a member may outlive a killed parent")
    if os.getppid() != parent_pid:
        raise SystemExit(f"tidemq: the parent process {parent_pid} is gone")


class MemberBroker(Broker):
    """A Broker whose routes and topics are the cluster's (siblings.py)."""

    def __init__(self, store_config: StoreConfig, config: BrokerConfig, siblings: Siblings, progress=None,
                 progress_interval_s: float | None = None) -> None:
        super().__init__(store_config, config, progress, progress_interval_s)
        self.siblings = siblings

    def _install(self, service) -> None:
        super()._install(service)
        service.siblings = self.siblings
        service.sends.spread = self.siblings.spread
        self.siblings.attach(service.store)

    async def stop(self) -> None:
        await asyncio.to_thread(self.siblings.close)
        await super().stop()


async def serve_member(store_config: StoreConfig, config: BrokerConfig, siblings: Siblings, ready=print,
                       progress=None, progress_interval_s: float | None = None) -> None:
    """server.serve for a member: until SIGTERM / SIGINT, then a clean stop."""
    await run_until_stopped(MemberBroker(store_config, config, siblings, progress, progress_interval_s), ready,
                            f"member {siblings.index} of {siblings.count}, ")
