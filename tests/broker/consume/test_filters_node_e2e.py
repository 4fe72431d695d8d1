"""SQL92 filters with the official Node.js client (npm `rocketmq-client-nodejs@1.0.8`, installed as
tests/broker/test_node_e2e.py installs it): a SimpleConsumer subscribed with
``new FilterExpression(sql, FilterType.SQL)`` receives exactly the matching messages."""

import json
import os
import subprocess
import tempfile

from ...support.brokers import SMALL, make_topic
from ..test_node_e2e import _client_log, node_client  # noqa: F401  (fixture)

RUN_TIMEOUT_S = 240

SCRIPT = r"""
'use strict';
const { Producer, SimpleConsumer, FilterExpression } = require('rocketmq-client-nodejs');
const { FilterType } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const [endpoints, topic] = process.argv.slice(2);
(async () => {
  const producer = new Producer({ endpoints, namespace: '', topics: [topic], requestTimeout: 30000 });
  await producer.startup();
  for (let i = 0; i < 12; i++) {
    const r = await producer.send({ topic, tag: i % 2 ? 'paid' : 'new', body: Buffer.from(`n${i}`),
      properties: new Map([['region', i % 3 === 0 ? 'eu' : 'us'], ['amount', String(i * 10)]]) });
    out({ event: 'sent', i, messageId: r.messageId });
  }
  const filter = new FilterExpression("region = 'eu' AND amount BETWEEN 20 AND 100", FilterType.SQL);
  const consumer = new SimpleConsumer({ endpoints, namespace: '', consumerGroup: 'node-sql', requestTimeout: 30000,
                                        subscriptions: new Map().set(topic, filter), awaitDuration: 2000 });
  await consumer.startup();
  const until = Date.now() + 120000;
  let got = 0;
  while (got < 3 && Date.now() < until) {
    for (const m of await consumer.receive(32, 300000)) {
      got += 1;
      out({ event: 'received', messageId: m.messageId, body: m.body.toString() });
      await consumer.ack(m);
    }
  }
  const again = await consumer.receive(32, 300000);
  out({ event: 'again', count: again.length });
  await consumer.shutdown();
  await producer.shutdown();
  out({ event: 'done' });
  process.exit(0);
})().catch((e) => { out({ event: 'error', message: String(e && e.message), stack: String(e && e.stack) });
                    process.exit(1); });
"""


def test_node_simple_consumer_with_a_sql92_filter(tmp_path, broker_factory, node_client):  # noqa: F811
    root = str(tmp_path / "store")
    make_topic(root, "NodeOrders", 2)
    b = broker_factory(root, env=SMALL)
    node, modules = node_client
    script = tmp_path / "sql.js"
    script.write_text(SCRIPT)
    home = tempfile.mkdtemp(prefix="tidemq-node-home-", dir=tmp_path)
    r = subprocess.run([node, str(script), b.endpoint, "NodeOrders"], capture_output=True, text=True,
                       timeout=RUN_TIMEOUT_S, env=dict(os.environ, HOME=home, NODE_PATH=modules), cwd=str(tmp_path))
    events = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    context = f"rc {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr[-3000:]}\n{_client_log(home)}"
    assert r.returncode == 0 and events and events[-1]["event"] == "done", context
    # region eu: i = 0, 3, 6, 9; amount 20..100: i = 2..10 -> 3, 6, 9
    assert sorted(e["body"] for e in events if e["event"] == "received") == ["n3", "n6", "n9"], context
    assert [e["count"] for e in events if e["event"] == "again"] == [0], context
