"""tidemq.cli.alarms: `tidemq alarms` shows and changes the limits of a running broker, signing its
calls and trusting its certificate when authentication and TLS are on."""

import json

from click.testing import CliRunner

from tidemq.cli.main import cli

from ..support.auth import AUTH


def test_alarms_command_signed_and_over_tls(tmp_path, broker_factory, certificate):
    """With authentication and TLS on, the admin commands sign with the broker's keys (the first super
    user: TIDEMQ_ACCESS_KEY / TIDEMQ_SECRET_KEY) and trust the client's CA file (never the broker's key
    file); `tidemq alarms --set-*` changes a limit of the running broker."""
    cert, key = certificate
    env = {**AUTH, "TIDEMQ_TLS_CERT_FILE": cert, "TIDEMQ_TLS_KEY_FILE": key}
    b = broker_factory(str(tmp_path / "store"), env=env)
    cli_env = {"TIDEMQ_ACCESS_KEY": AUTH["TIDEMQ_ACCESS_KEY"], "TIDEMQ_SECRET_KEY": AUTH["TIDEMQ_SECRET_KEY"],
               "TIDEMQ_CLIENT_CA_FILE": cert}
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
    assert r.exit_code == 2 and "UNAUTHORIZED" in r.output
    r = runner.invoke(cli, ["alarms", "--endpoint", b.endpoint], env={**cli_env, "TIDEMQ_CLIENT_CA_FILE": None},
                      catch_exceptions=False)
    assert r.exit_code == 2 and "speaks TLS: use --tls and --ca-file" in r.output, r.output
    r = runner.invoke(cli, ["alarms", "--endpoint", b.endpoint, "--tls"], env={**cli_env, "TIDEMQ_CLIENT_CA_FILE": None},
                      catch_exceptions=False)
    assert r.exit_code == 2 and "not signed by a CA this client trusts" in r.output, r.output
