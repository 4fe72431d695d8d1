"""The HTTP port before the store is ready and while it stops (no broker needed)."""

from tidemq.broker.observe.http import OpsServer

from tests.support.scrape import get as code_of


def test_not_ready_while_recovering_and_while_stopping():
    ops = OpsServer("127.0.0.1", 0)
    try:
        assert code_of(ops.port, "/healthz") == (200, "ok\n")
        assert code_of(ops.port, "/readyz") == (503, "recovering: the store is starting\n")
        assert code_of(ops.port, "/metrics")[0] == 503
        ops.ready(object())
        assert code_of(ops.port, "/readyz") == (200, "ready\n")
        ops.stopping()
        assert code_of(ops.port, "/readyz") == (503, "stopping\n")
    finally:
        ops.close()
