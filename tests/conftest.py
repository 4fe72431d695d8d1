"""Fixtures every test directory may use, and the command-line options.

Importing tests.support.brokers first points HOME at a scratch directory, before anything
imports the official RocketMQ client (it writes logs under ~/logs/)."""

from tests.support.brokers import broker_factory  # noqa: F401  (fixture)
from tests.support.auth import ca_certificates, certificate  # noqa: F401  (fixtures)
from tests.support.tmpfs import can_mount, env  # noqa: F401  (fixtures)


def pytest_addoption(parser):
    parser.addoption("--sim-seeds", type=int, default=150,
                     help="seeds per flush mode for the store simulation, and two thirds of it per "
                          "replication mode for the broker group's (tests/sim)")
