"""The official RocketMQ 5 Python client (rocketmq-python-client) sending to tidemq, versus the same
client sending to a do-nothing server of the same protocol: the broker must never be the
bottleneck of the official client.

    .venv/bin/python bench/official_client.py            # 5 rounds, <= 3000 msgs or 20 s per sample
    .venv/bin/python bench/official_client.py --quick    # 1 round of 300: a smoke run

Per round, in a rotating order (each sample in its own client process, each server fresh):

* ``tidemq``: ``tidemq serve`` (defaults: ASYNC_FLUSH) in a subprocess on a fresh store under
  bench/.tmp, topic ``Bench`` with 8 queues.
* ``null server`` (the reference): a do-nothing ``apache.rocketmq.v2.MessagingService`` written in
  this file (``--serve-null``), a grpc.aio server in a subprocess: QueryRoute answers one
  READ_WRITE queue with the request's endpoints, Telemetry answers every settings command with
  status OK, publishing.max_body_size, an exponential backoff and metric off (the stream stays
  open), Heartbeat and NotifyClientTermination OK, SendMessage OK with one entry per message
  echoing its message_id. It stores nothing.
* ``null server on uvloop`` (for information): the same do-nothing server on uvloop's event loop
  (tidemq's default, BrokerConfig.event_loop), so the ratio against the loop tidemq runs on can be
  read too: its ratio column is against the reference, tidemq / it is the quotient of the two.

The client process (``--client-run``): Producer(ClientConfiguration(endpoint, Credentials(),
request_timeout=10), ("Bench",)), startup, 50 untimed sends, then ``Producer.send`` of a 1 KiB
message, one per request, until ``--count`` messages or ``--max-seconds``; shutdown. HOME points
at a scratch directory (the client writes ~/logs/rocketmq_python/).

With ``--in-flight N`` (default 64; 0 leaves it out), also ``tidemq, send_async N`` and ``null server,
send_async N``: the same client keeping at most N ``Producer.send_async`` sends unanswered; tidemq's
row is paired with the null server's send_async row of the same round (issue 32: >= 0.9 x too).
The servers and the client process live in bench/_official.py.

Goal (issue 6): tidemq >= 0.9 x the do-nothing server. Also reported: the mean latency of a send
and the CPU cores the server process used during the sample.
"""

from __future__ import annotations

import argparse
import json
import os

from _report import BENCH_SRC, Report, progress, scratch_dir
from _official import NULL_UVLOOP, client_run, measure, serve_null

GOAL = 0.9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--count", type=int, default=3000, help="sends per sample (upper bound)")
    ap.add_argument("--max-seconds", type=float, default=20.0, help="time bound of the timed sends")
    ap.add_argument("--body-bytes", type=int, default=1024)
    ap.add_argument("--quick", action="store_true", help="1 round of 300 sends: a smoke run")
    ap.add_argument("--serve-null", type=int, metavar="PORT", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--null-loop", choices=("asyncio", "uvloop"), default="asyncio", help=argparse.SUPPRESS)
    ap.add_argument("--in-flight", type=int, default=64,
                    help="the send_async variant's sends unanswered at most (0: leave it out)")
    ap.add_argument("--client-run", metavar="ENDPOINT", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve_null is not None:
        serve_null(a.serve_null, a.null_loop)
        return
    if a.client_run:
        print(json.dumps(client_run(a.client_run, a.count, a.max_seconds, a.body_bytes, a.in_flight)), flush=True)
        return
    if a.quick:
        a.rounds, a.count = 1, 300
    rep = Report("official_client", unit="msgs/s", reference="null server",
                 reference_doc="a do-nothing MessagingService (grpc.aio, in a subprocess, written in "
                               "bench/official_client.py): route, settings, heartbeat, SendMessage OK; stores nothing",
                 params={"client": "rocketmq-python-client " + _dist("rocketmq-python-client"),
                         "body_bytes": a.body_bytes, "rounds": a.rounds, "count_per_sample_max": a.count,
                         "max_seconds_per_sample": a.max_seconds, "warmup_sends": 50, "in_flight": a.in_flight,
                         "tidemq": "tidemq serve, defaults (ASYNC_FLUSH), topic of 8 queues",
                         "send": "Producer.send, one 1 KiB message per request, synchronous"})
    rep.ratio("tidemq", GOAL)
    rep.ratio(NULL_UVLOOP, None)
    kinds = [("tidemq", 1), ("null server", 1), (NULL_UVLOOP, 1)]
    if a.in_flight > 1:
        async_null, async_tidemq = f"null server, send_async {a.in_flight}", f"tidemq, send_async {a.in_flight}"
        rep.ratio(async_null, None)
        rep.ratio(async_tidemq, GOAL)       # paired with the null server's send_async of the same round
        kinds += [("tidemq", a.in_flight), ("null server", a.in_flight)]
    with scratch_dir("official_client") as tmp:
        home = os.path.join(tmp, "home")
        os.makedirs(home)
        env = dict(os.environ, HOME=home, PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = BENCH_SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        os.environ["HOME"] = home         # this process imports tidemq.protocol.admin only, but to be safe
        for r in range(a.rounds):
            order = kinds[r % len(kinds):] + kinds[:r % len(kinds)]
            if r // len(kinds) % 2:
                order.reverse()
            got, got_async = {}, {}
            for k, n in order:
                res = measure(k, os.path.join(tmp, f"{k.replace(' ', '_')}-{n}-{r}"), env, a.count, a.max_seconds,
                              a.body_bytes, in_flight=n)
                (got if n == 1 else got_async)[k] = res
                progress(f"round {r + 1}/{a.rounds} {k} in flight {n}: {res['messages'] / res['seconds']:,.0f} msgs/s "
                         f"({res['messages']} in {res['seconds']:.2f}s, {res['send_ms']:.3f} ms per send; "
                         f"server {res['server_cores_avg']:.2f} cores, {res['server_us_per_msg']:.0f} us per msg)")
            ref = got["null server"]["messages"] / got["null server"]["seconds"]
            rep.add("null server", ref, **_cols(got["null server"]))
            x = got["tidemq"]["messages"] / got["tidemq"]["seconds"]
            rep.add("tidemq", x, ref=ref, **_cols(got["tidemq"]))
            u = got[NULL_UVLOOP]["messages"] / got[NULL_UVLOOP]["seconds"]
            rep.add(NULL_UVLOOP, u, ref=ref, **_cols(got[NULL_UVLOOP]))
            line = f"tidemq / null server = {x / ref:.3f}, tidemq / null server on uvloop = {x / u:.3f}"
            if got_async:
                an = got_async["null server"]["messages"] / got_async["null server"]["seconds"]
                at = got_async["tidemq"]["messages"] / got_async["tidemq"]["seconds"]
                rep.add(async_null, an, ref=ref, **_cols(got_async["null server"]))
                rep.add(async_tidemq, at, ref=an, **_cols(got_async["tidemq"]))
                line += f"; send_async {a.in_flight}: tidemq / null server = {at / an:.3f}"
            progress(f"round {r + 1}/{a.rounds}: {line}")
        rep.note("send_ms: mean wall time of one Producer.send (send_async: the time a send is unanswered). "
                 "server_cores: CPU seconds of the server process per second of the client process's life "
                 "(startup, warm-up, timed sends, shutdown); server_us_per_msg: the server's CPU over that life "
                 "per message sent (warm-up included), an upper bound of its CPU per call.")
        if a.in_flight > 1:
            rep.note(f"'{async_tidemq}': Producer.send_async with at most {a.in_flight} sends unanswered, its ratio "
                     f"against '{async_null}' (the do-nothing server, the same client) of the same round; "
                     f"'{async_null}''s ratio column is against the synchronous reference.")
        rep.write(tmp)


def _cols(res: dict) -> dict:
    return {"send_ms": res["send_ms"], "server_cores": res["server_cores_avg"],
            "server_us_per_msg": res["server_us_per_msg"]}


def _dist(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    main()
