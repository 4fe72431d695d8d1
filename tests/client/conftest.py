from tests.broker.conftest import broker_factory  # noqa: F401  (the broker subprocess fixture)
