"""The official Node.js client (npm `rocketmq-client-nodejs@1.0.8`) against `tidemq serve`.

A small JS program (written to tmp_path, run with `node`) starts a Producer and a
SimpleConsumer, sends a few messages, receives them all (invisible for minutes: no stall of
the machine makes one come back meanwhile), changes the invisible duration of one, acks with a
stale handle (refused), then shortens each to a second and acks it with its current handle,
waits past those seconds and polls again: nothing acked comes back. It prints one JSON object per line; the assertions are
here. The client is installed once per session into tests/.node/ (git-ignored); the test is
skipped when `node` is missing or `npm install` fails (no registry).
"""

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from ..support.brokers import REPO, SMALL, make_topic

CLIENT = "rocketmq-client-nodejs"
VERSION = "1.0.8"
NODE_DIR = os.path.join(REPO, "tests", ".node")
INSTALL_TIMEOUT_S = 180
RUN_TIMEOUT_S = 240
COUNT = 6
INVISIBLE_MS = 300_000         # of the receive; each message is shortened to 1 s before its ack
INVALID_RECEIPT_HANDLE = 40013

SCRIPT = r"""
'use strict';
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');
// MessageView leaves `corrupted` unset both when the digest matches and when its type is unknown:
// count which digest the client computed (dist/util of 1.0.8, looked up at call time).
const util = require('rocketmq-client-nodejs/dist/util');
const digests = { CRC32: 0, MD5: 0, SHA1: 0 };
for (const [alg, fn] of [['CRC32', 'crc32CheckSum'], ['MD5', 'md5CheckSum'], ['SHA1', 'sha1CheckSum']]) {
  const orig = util[fn];
  util[fn] = (bytes) => { digests[alg] += 1; return orig(bytes); };
}

const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const [endpoints, topic, group, countArg, invisibleArg] = process.argv.slice(2);
const count = Number(countArg);
const invisibleMs = Number(invisibleArg);

const view = (m) => ({
  messageId: m.messageId, topic: m.topic, body: m.body.toString('base64'), tag: m.tag ?? null,
  keys: m.keys, properties: Object.fromEntries(m.properties), deliveryAttempt: m.deliveryAttempt ?? null,
  corrupted: m.corrupted === true, receiptHandle: m.receiptHandle, offset: m.offset ?? null,
});
const failure = (e) => ({ name: e && e.name, code: e && e.code, message: String(e && e.message) });

(async () => {
  const producer = new Producer({ endpoints, namespace: '', topics: [topic], requestTimeout: 30000 });
  await producer.startup();          // resolves only after the first Telemetry settings reply
  out({ event: 'producer_started' });
  const msg = (i) => ({ topic, tag: `Tag${i % 2}`, keys: [`k${i}`, `order-${i}`],
                        properties: new Map([['n', String(i)]]), body: Buffer.from(`node-body-${i}`) });
  const half = Math.floor(count / 2);
  for (let i = 0; i < half; i++) {                               // one at a time, then the rest at once
    const r = await producer.send(msg(i));
    out({ event: 'sent', i, messageId: r.messageId, offset: Number(r.offset) });
  }
  const rs = await Promise.all(Array.from({ length: count - half }, (_, j) => producer.send(msg(half + j))));
  rs.forEach((r, j) => out({ event: 'sent', i: half + j, messageId: r.messageId, offset: Number(r.offset) }));

  const consumer = new SimpleConsumer({ endpoints, namespace: '', consumerGroup: group, requestTimeout: 30000,
                                        subscriptions: new Map().set(topic, '*'), awaitDuration: 2000 });
  await consumer.startup();
  out({ event: 'consumer_started' });
  const got = [];
  const until = Date.now() + 120000;
  while (got.length < count && Date.now() < until) {           // from every queue, in as many polls as it takes
    for (const m of await consumer.receive(32, invisibleMs)) {
      got.push(m);
      out({ event: 'received', ...view(m) });
    }
  }
  out({ event: 'digests', ...digests });
  if (got.length === 0) throw new Error('nothing received');

  const first = got[0];
  const oldHandle = first.receiptHandle;
  await consumer.changeInvisibleDuration(first, 30000);
  out({ event: 'changed', messageId: first.messageId, oldHandle, newHandle: first.receiptHandle });
  const stale = Object.assign(Object.create(Object.getPrototypeOf(first)), first, { receiptHandle: oldHandle });
  try {
    await consumer.ack(stale);
    out({ event: 'stale_ack', ok: true });
  } catch (e) {
    out({ event: 'stale_ack', ok: false, ...failure(e) });
  }
  for (const m of got) {
    await consumer.changeInvisibleDuration(m, 1000);     // back in a second unless the ack below holds
    await consumer.ack(m);
    out({ event: 'acked', messageId: m.messageId });
  }

  await sleep(2000);                 // every one of them would be visible again by now
  const again = await consumer.receive(32, invisibleMs);
  out({ event: 'second_receive', messages: again.map(view) });

  await consumer.shutdown();
  await producer.shutdown();
  out({ event: 'done' });
  process.exit(0);                   // the client's timers and channels keep node alive otherwise
})().catch((e) => {
  out({ event: 'error', ...failure(e), stack: String(e && e.stack) });
  process.exit(1);
});
"""


def _installed_version():
    try:
        with open(os.path.join(NODE_DIR, "node_modules", CLIENT, "package.json")) as f:
            return json.load(f).get("version")
    except (OSError, ValueError):
        return None


@pytest.fixture(scope="session")
def node_client():
    """`node` and the client, installed into tests/.node/ once; the node_modules path."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node:
        pytest.skip("node is not on PATH")
    os.makedirs(NODE_DIR, exist_ok=True)
    with open(os.path.join(NODE_DIR, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)        # one install even if several sessions start at once
        if _installed_version() != VERSION:
            if not npm:
                pytest.skip("npm is not on PATH")
            cmd = [npm, "install", "--no-audit", "--no-fund", "--prefix", NODE_DIR, f"{CLIENT}@{VERSION}"]
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, cwd=REPO)
            except subprocess.TimeoutExpired:
                pytest.skip(f"npm install {CLIENT}@{VERSION} did not finish in {INSTALL_TIMEOUT_S} s")
            if r.returncode != 0 or _installed_version() != VERSION:
                lines = [ln for ln in r.stderr.splitlines() if ln.startswith("npm error") and ln[9:].strip()]
                why = " | ".join(lines[:4]) or (r.stderr or r.stdout).strip()[-600:]
                pytest.skip(f"npm install {CLIENT}@{VERSION} failed (rc {r.returncode}): {why}")
    return node, os.path.join(NODE_DIR, "node_modules")


def run_node(node_client, tmp_path, endpoint, topic, group):
    node, modules = node_client
    script = tmp_path / "node_e2e.js"
    script.write_text(SCRIPT)
    home = tempfile.mkdtemp(prefix="tidemq-node-home-", dir=tmp_path)   # logs go to ~/logs/rocketmq/
    env = dict(os.environ, HOME=home, NODE_PATH=modules)
    start = time.monotonic()
    try:
        r = subprocess.run([node, str(script), endpoint, topic, group, str(COUNT), str(INVISIBLE_MS)],
                           capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env, cwd=str(tmp_path))
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"the node client did not finish in {RUN_TIMEOUT_S} s; stdout:\n{e.stdout}\n"
                             f"stderr:\n{e.stderr}\n{_client_log(home)}") from None
    events = []
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            events.append(json.loads(line))
    context = (f"rc {r.returncode} after {time.monotonic() - start:.1f} s\nstdout:\n{r.stdout}\n"
               f"stderr:\n{r.stderr[-3000:]}\n{_client_log(home)}")
    return r.returncode, events, context


def _client_log(home):
    path = os.path.join(home, "logs", "rocketmq", "rocketmq_client_nodejs.log")
    try:
        with open(path, errors="replace") as f:
            return "client log (tail):\n" + f.read()[-4000:]
    except OSError:
        return "(no client log)"


def test_node_producer_and_simple_consumer(tmp_path, broker_factory, node_client):
    root = str(tmp_path / "store")
    make_topic(root, "NodeJobs", 4)
    b = broker_factory(root, env=SMALL)
    rc, events, context = run_node(node_client, tmp_path, b.endpoint, "NodeJobs", "node-workers")
    errors = [e for e in events if e["event"] == "error"]
    assert not errors and rc == 0 and events and events[-1]["event"] == "done", context

    sent = {e["messageId"]: e["i"] for e in events if e["event"] == "sent"}
    assert sorted(sent.values()) == list(range(COUNT)), context
    assert all(e["offset"] >= 0 for e in events if e["event"] == "sent"), context

    received = [e for e in events if e["event"] == "received"]
    assert sorted(m["messageId"] for m in received) == sorted(sent), "every message, from every queue, once\n" + context
    for m in received:
        i = sent[m["messageId"]]
        assert base64.b64decode(m["body"]) == b"node-body-%d" % i, context
        assert m["topic"] == "NodeJobs" and m["tag"] == "Tag%d" % (i % 2), context
        assert sorted(m["keys"]) == sorted(["k%d" % i, "order-%d" % i]), context
        assert m["properties"] == {"n": str(i)}, context
        assert m["deliveryAttempt"] == 1, context
        assert m["corrupted"] is False, "the MD5 body digest checks out in the Node client\n" + context
        assert m["receiptHandle"], context

    [digests] = [e for e in events if e["event"] == "digests"]
    assert digests == {"event": "digests", "CRC32": 0, "MD5": len(received), "SHA1": 0}, \
        "every message carried an MD5 digest the client verified\n" + context

    [changed] = [e for e in events if e["event"] == "changed"]
    assert changed["newHandle"] and changed["newHandle"] != changed["oldHandle"], context
    [stale] = [e for e in events if e["event"] == "stale_ack"]
    assert stale["ok"] is False and stale["code"] == INVALID_RECEIPT_HANDLE, \
        "the handle from before the change is stale\n" + context
    assert sorted(e["messageId"] for e in events if e["event"] == "acked") == sorted(sent), context

    [second] = [e for e in events if e["event"] == "second_receive"]
    assert second["messages"] == [], "nothing acked comes back after the invisible time\n" + context
