"""Helpers shared by the test modules (test modules import from here, never from each other).

    wait       wait_until: poll a condition with a generous bound (a hang detector, never a speed)
    brokers    a broker subprocess on a free port, the broker_factory fixture, small-store env
               presets, make_topic / stored (a stopped broker's store)
    official   the official RocketMQ Python client: msg, receive_all, the clients fixture
    auth       the AUTH env and the certificate fixture (a self-signed certificate)
    scrape     the metrics port: get, a parsed Prometheus scrape
    tmpfs      small real tmpfs mounts, always unmounted (can_mount, env fixtures)
    store      small store configurations, fault-injection helpers, the stores fixture
    pop        Consumption (pop) helpers over a real store and a ManualClock
    spark      filling a topic through a broker, rows in a comparable order
    kill9_child  the child process of the kill -9 test (python -m tests.support.kill9_child)

Fixtures are registered by the conftest.py files that import them.
"""
