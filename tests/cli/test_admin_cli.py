"""`tidemq topic` and `tidemq disk` through a running broker's admin service (--endpoint),
and offline on a store directory that a broker holds (refused clearly)."""

import json

from click.testing import CliRunner

from tidemq.cli.main import cli
from tidemq.store import MessageStore, StoreConfig

from ..support.auth import AUTH


def run(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_topics_and_disk_through_the_broker(tmp_path, broker_factory):
    root = str(tmp_path / "store")
    b = broker_factory(root)
    r = run(["topic", "create", "Made", "--queues", "3", "--endpoint", b.endpoint])
    assert r.exit_code == 0 and "3 queue(s)" in r.output
    r = run(["topic", "list", "--endpoint", b.endpoint, "--json"])
    doc = json.loads(r.output)
    from tidemq.broker.deferred.parking import SYSTEM_TOPICS
    user = [d for d in doc if d["topic"] not in SYSTEM_TOPICS]     # the broker's own are listed too
    assert [d["topic"] for d in user] == ["Made"] and len(user[0]["queues"]) == 3
    assert {d["topic"] for d in doc} - {"Made"} == SYSTEM_TOPICS
    r = run(["disk", "--endpoint", b.endpoint, "--json"])
    st = json.loads(r.output)
    assert {d["role"] for d in st["directories"]} == {"commitlog", "consumequeue", "index"}
    assert "forecast" in st and st["flags"]["write_refusal"] is None
    r = run(["topic", "create", "bad name!", "--endpoint", b.endpoint])
    assert r.exit_code == 1 and "invalid topic name" in r.output
    r = run(["topic", "create", "Other", "--root", root])
    assert r.exit_code == 2 and "in use by another process" in r.output, "the broker holds the store"
    from tidemq.client import Producer
    with Producer(b.endpoint) as p:
        assert all(x.ok for x in p.send_batch("Made", [b"a", b"b", b"c"]))
    # the space policy: set at creation or later, shown by list and status
    r = run(["topic", "create", "Held", "--queues", "2", "--space-policy", "refuse", "--endpoint", b.endpoint])
    assert r.exit_code == 0 and "space policy refuse" in r.output, r.output
    r = run(["topic", "create", "Made", "--space-policy", "refuse", "--endpoint", b.endpoint])
    assert r.exit_code == 0 and "3 queue(s), space policy refuse" in r.output, "set on an existing topic, queues kept"
    r = run(["topic", "list", "--endpoint", b.endpoint, "--json"])
    policies = {d["topic"]: d["space_policy"] for d in json.loads(r.output)}
    assert policies["Held"] == policies["Made"] == "refuse" and set(policies.values()) == {"refuse", "evict"}
    r = run(["topic", "status", "Held", "--endpoint", b.endpoint])
    assert r.exit_code == 0 and "space policy refuse" in r.output, r.output
    r = run(["topic", "create", "Bad", "--space-policy", "keep", "--endpoint", b.endpoint])
    assert r.exit_code == 2 and "'keep' is not one of 'evict', 'refuse'" in r.output, r.output
    r = run(["topic", "create", "Huge", "--queues", "1000000", "--endpoint", b.endpoint])
    assert r.exit_code == 1 and "topic_queues_max" in r.output, r.output


def test_the_space_policy_of_a_stopped_store(tmp_path):
    root = str(tmp_path / "store")
    MessageStore(StoreConfig(root_dir=root, segment_size_bytes=1 << 20, index_slots=100,
                             index_entries=400)).start().shutdown()    # offline commands never make a store
    r = run(["topic", "create", "Held", "--queues", "2", "--space-policy", "refuse", "--root", root])
    assert r.exit_code == 0 and "space policy refuse" in r.output, r.output
    r = run(["topic", "create", "Free", "--root", root])
    assert r.exit_code == 0 and "space policy evict" in r.output, r.output
    r = run(["topic", "list", "--root", root, "--json"])
    assert {d["topic"]: d["space_policy"] for d in json.loads(r.output)} == {"Held": "refuse", "Free": "evict"}
    r = run(["topic", "list", "--root", root])
    assert "space policy" in r.output and "refuse" in r.output


def test_unreachable_broker_is_a_clear_error():
    r = run(["topic", "list", "--endpoint", "127.0.0.1:1"])
    assert r.exit_code == 2 and "UNAVAILABLE" in r.output


def test_alarms_command_signed_and_over_tls(tmp_path, broker_factory, certificate):
    """With authentication and TLS on, the admin commands sign with the configured keys and trust
    the configured certificate; `tidemq alarms --set-*` changes a limit of the running broker."""
    cert, key = certificate
    env = {**AUTH, "TIDEMQ_TLS_CERT_FILE": cert, "TIDEMQ_TLS_KEY_FILE": key}
    b = broker_factory(str(tmp_path / "store"), env=env)
    cli_env = {k: v for k, v in env.items() if k in ("TIDEMQ_ACCESS_KEY", "TIDEMQ_SECRET_KEY", "TIDEMQ_TLS_CERT_FILE",
                                                     "TIDEMQ_TLS_KEY_FILE")}
    runner = CliRunner()
    r = runner.invoke(cli, ["alarms", "--endpoint", b.endpoint], env=cli_env, catch_exceptions=False)
    assert r.exit_code == 0 and "writes: accepted" in r.output and "authentication on, TLS on" in r.output
    r = runner.invoke(cli, ["alarms", "--endpoint", b.endpoint, "--set-memory-high-watermark-bytes", "1048576",
                            "--json"], env=cli_env, catch_exceptions=False)
    st = json.loads(r.output)
    assert st["memory"]["raised"] and st["refusal"].startswith("memory alarm")
    assert st["changed"] == [f"memory_high_watermark_bytes = 1048576 on {b.endpoint} until it restarts; to keep it, "
                             f"set it in [broker] of the TOML file or TIDEMQ_MEMORY_HIGH_WATERMARK_BYTES"]
    assert r.exit_code == 0, "a change was asked for and made"
    r = runner.invoke(cli, ["alarms", "--endpoint", b.endpoint], env=cli_env, catch_exceptions=False)
    assert r.exit_code == 1 and "writes: held" in r.output and "MEMORY_ALARM" in r.output, "check_local_alarms"
    r = runner.invoke(cli, ["topic", "list", "--endpoint", b.endpoint], env=cli_env, catch_exceptions=False)
    assert r.exit_code == 0
    r = runner.invoke(cli, ["alarms", "--endpoint", b.endpoint], env={**cli_env, "TIDEMQ_SECRET_KEY": "wrong"},
                      catch_exceptions=False)
    assert r.exit_code == 2 and "UNAUTHENTICATED" in r.output
