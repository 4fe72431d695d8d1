"""How the benchmarks run: their shared command-line options and their two round loops.

Options (``Options``, an ArgumentParser): every benchmark takes ``--rounds``, ``--count`` and
``--max-seconds`` (a sample stops at whichever bound comes first) and ``--quick`` (a smoke run:
the benchmark's own overrides of those defaults); the store ones add ``store_options()``
(``--segment-mib``, ``--only``), the broker ones ``broker_options()`` (``--batch``,
``--in-flight``, ``--body-bytes``, ``--peers``, ``--info-seconds``).

Store loop (``paired_rounds``): every round, every variant once; right before each variant's
sample the reference is measured (and recorded as the pair of that sample), the sample runs
(on a fresh store: the scratch directory is emptied after every sample), one progress line.

Broker loop (``broker_rounds``): every round measures every system once, in a rotating order,
each on a fresh server in a fresh directory; the best peer of the round is the reference every
variant of that round is paired with. ``timed_sample`` measures one sample with the CPU cores
the server process and this (client) process used during it.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any, Callable, NamedTuple, Sequence

from _broker import proc_cpu_seconds
from _report import Report, clear_dir, progress, settle
from peers import PEERS, ensure_installed


# Options -----------------------------------------------------------------------------
class Options(argparse.ArgumentParser):
    """The benchmark's docstring as description; ``--rounds``, ``--count``, ``--max-seconds`` with
    its defaults, ``--quick`` setting the attributes in ``quick`` (e.g. ``{"rounds": 1, "count":
    20_000}``) after parsing."""

    def __init__(self, doc: str | None, *, rounds: int, count: int, count_help: str, max_seconds: float,
                 quick: dict[str, Any], quick_help: str, max_seconds_help: str = "time bound per sample") -> None:
        super().__init__(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
        self.quick = quick
        self.add_argument("--rounds", type=int, default=rounds)
        self.add_argument("--count", type=int, default=count, help=count_help)
        self.add_argument("--max-seconds", type=float, default=max_seconds, help=max_seconds_help)
        self.add_argument("--quick", action="store_true", help=quick_help)

    def store_options(self) -> "Options":
        self.add_argument("--segment-mib", type=int, default=1024, choices=(256, 1024))
        self.add_argument("--only", default="", help="comma-separated variant names (default: all)")
        return self

    def broker_options(self, *, batch_help: str, in_flight_help: str, info_seconds_help: str) -> "Options":
        self.add_argument("--batch", type=int, default=256, help=batch_help)
        self.add_argument("--in-flight", type=int, default=4, help=in_flight_help)
        self.add_argument("--body-bytes", type=int, default=1024)
        self.add_argument("--peers", default="redis,nats")
        self.add_argument("--info-seconds", type=float, default=5.0, help=info_seconds_help)
        return self

    def parse_args(self, args=None, namespace=None):   # type: ignore[override]
        a = super().parse_args(args, namespace)
        if a.quick:
            for k, v in self.quick.items():
                setattr(a, k, v)
        return a


def only(variants: Sequence, names: str) -> list:
    """The variants (with a ``name``) among the comma-separated ``names`` (``--only``); all if empty."""
    return [v for v in variants if not names or v.name in names.split(",")]


# Store loop --------------------------------------------------------------------------
class Sample(NamedTuple):
    value: float                 # the rate reported
    extra: dict[str, float]      # the report's other columns for this sample
    text: str                    # its part of the progress line


def paired_rounds(rep: Report, rounds: int, variants: Sequence, reference: Callable[[], Sample],
                  sample: Callable[[Any], Any], row: Callable[[Any, Sample, Any], Sample],
                  scratch: str | None = None, round_start: Callable[[int], None] | None = None) -> None:
    """``rounds`` x every variant (each with a ``name``): ``reference()`` measured right before the
    variant's ``sample(variant)``; with ``scratch``, that directory emptied after every sample (the
    next one gets a fresh store); then ``row(variant, reference, result)`` gives the variant's
    sample, recorded paired with that reference. ``round_start(r)`` runs first in every round."""
    for r in range(rounds):
        if round_start is not None:
            round_start(r)
        for v in variants:
            ref = reference()
            rep.add(rep.reference, ref.value, **ref.extra)
            res = sample(v)
            if scratch is not None:
                clear_dir(scratch)
            got = row(v, ref, res)
            rep.add(v.name, got.value, ref=ref.value, **got.extra)
            progress(f"round {r + 1}/{rounds}: {ref.text}, {got.text}")


# Broker loop -------------------------------------------------------------------------
def install_peers(a: argparse.Namespace) -> list[str]:
    """The peers named by ``--peers``; their servers installed if missing."""
    peers = [p for p in a.peers.split(",") if p]
    ensure_installed(progress)
    return peers


def best_peer_doc(what: str, peers: Sequence[str]) -> str:
    return f"the higher {what} rate of the durable peers in the same round: " + "; ".join(PEERS[p].label for p in peers)


def cores_note(per: str) -> str:
    return ("server_cores / client_cores: CPU seconds of the server process / of this benchmark process "
            f"(the client, with gRPC's threads) per second of the {per}; the machine has {os.cpu_count()} CPUs.")


def timed_sample(system, run: Callable[..., dict], *args, **kw) -> dict:
    """``run(*args, **kw)`` (a produce or consume of ``system``, returning messages and seconds)
    after settle(), with ``server_cores`` / ``client_cores``: CPU seconds of the system's server
    process / of this process per second of the sample."""
    settle()
    srv0, cli0 = proc_cpu_seconds(system.pid), time.process_time()
    r = run(*args, **kw)
    r["server_cores"] = (proc_cpu_seconds(system.pid) - srv0) / r["seconds"]
    r["client_cores"] = (time.process_time() - cli0) / r["seconds"]
    return r


def broker_rounds(rep: Report, tmp: str, rounds: int, systems: dict[str, Callable[[str], dict[str, dict]]],
                  variants: Sequence[str], peers: Sequence[str]) -> None:
    """``rounds`` x every system once, the order rotating by one every round. ``systems[name](workdir)``
    starts the system on a fresh server in ``workdir`` (under ``tmp``, one per system and round),
    measures it, stops it, and returns its samples by variant (messages, seconds, server_cores,
    client_cores; ``filled``: what was there to read). Every round records the best peer's rate
    as ``best peer`` and every one of ``variants`` paired with it."""
    names = list(systems)
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        got: dict[str, dict] = {}
        for n in order:
            for v, res in systems[n](os.path.join(tmp, f"{n.replace(' ', '_')}-{r}")).items():
                got[v] = res
                of = f" of {res['filled']}" if "filled" in res else ""
                progress(f"round {r + 1}/{rounds} {v}: {res['messages'] / res['seconds']:,.0f} msgs/s "
                         f"({res['messages']}{of} in {res['seconds']:.2f}s; server {res['server_cores']:.2f} cores, "
                         f"client {res['client_cores']:.2f})")
        rates = {v: res["messages"] / res["seconds"] for v, res in got.items()}
        best = max(rates[p] for p in peers)
        rep.add(rep.reference, best)
        for v in variants:
            rep.add(v, rates[v], ref=best, messages=got[v]["messages"], server_cores=got[v]["server_cores"],
                    client_cores=got[v]["client_cores"])
        progress(f"round {r + 1}/{rounds}: tidemq / best peer = {rates['tidemq'] / best:.2f}")
