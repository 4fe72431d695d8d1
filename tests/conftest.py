def pytest_addoption(parser):
    parser.addoption("--sim-seeds", type=int, default=150,
                     help="seeds per flush mode for the store simulation (tests/sim)")
