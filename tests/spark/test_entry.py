"""A worker whose Python misses one of tidemq's dependencies fails with tidemq's one-line error
naming it and the fix, also where the dependency is imported late: grpc and protobuf in broker
mode and in the sink. The RocketMQ stubs are tidemq's own (protocol/rocketmq_v2): broker mode needs no
official client on the worker. Each worker is a fresh
interpreter whose sys.modules holds None for the dependency (what `import` refuses)."""

import json
import subprocess
import sys

import pytest

from tidemq.spark import entry

CALLS = {
    "broker mode": "from tidemq.spark.backend import BrokerBackend; BrokerBackend('127.0.0.1:1')",
    "sink": "from tidemq.spark.sink import _Sender; "
            "_Sender({'endpoints': '127.0.0.1:1', 'topic': 'T'}, 'w').send(iter([]), '0')",
    "reader": "from tidemq.spark import entry; entry._source()",
}


def worker_without(module: str, call: str) -> dict:
    code = (f"import json, sys\nsys.modules[{module!r}] = None\n"
            f"try:\n    {CALLS[call]}\n    print(json.dumps({{'error': None}}))\n"
            f"except Exception as e:\n    print(json.dumps({{'error': type(e).__name__, 'text': str(e)}}))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.stdout.strip(), r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module,call", [("grpc", "broker mode"), ("google.protobuf", "broker mode"),
                                         ("grpc", "sink"), ("numpy", "reader"),
                                         ("pyarrow", "reader")])
def test_a_missing_dependency_is_one_line_naming_it_and_the_fix(module, call):
    got = worker_without(module, call)
    assert got["error"] == "MissingOnWorker", got
    assert "\n" not in got["text"] and f"cannot import '{module}" in got["text"] and entry.FIX in got["text"]


def test_broker_mode_needs_no_official_client_on_the_worker():
    assert worker_without("rocketmq", "broker mode") == {"error": None}
