"""``berth conductor``'s settings: one declaration for the options, a settings file and the
environment, and the refusals an operator meets before anything starts."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from berth.cli import settings
from berth.cli.main import main
from berth.cli.services.conductor import ConductorSettings, load_settings


def test_every_setting_has_an_environment_variable():
    assert [item.name for item in settings.declared(ConductorSettings) if not item.spec.env] == []


def test_the_command_line_wins_over_the_file_which_wins_over_the_environment(tmp_path):
    config = tmp_path / "conductor.yaml"
    config.write_text("host_down_after: 30\ndead_after: 20\n")
    environ = {"BERTH_CONDUCTOR_HOST_DOWN_AFTER": "90", "BERTH_CONDUCTOR_DEAD_AFTER": "90", "BERTH_METRICS": "open"}
    resolved = load_settings({"config": str(config), "dead_after": 5.0}, environ)
    assert (resolved.host_down_after, resolved.dead_after, resolved.metrics) == (30.0, 5.0, "open")


def test_noauth2_on_a_public_address_is_refused(capsys):
    assert main(["conductor", "--bind", "0.0.0.0:0"]) == 2
    assert "noauth2" in capsys.readouterr().err


def test_a_taken_port_is_refused_with_what_to_do(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [sys.executable, "-m", "berth.cli.main", "conductor", "--bind", f"127.0.0.1:{port}"]
        command += ["--database", f"sqlite:///{tmp_path}/c.sqlite"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "Address already in use" in done.stderr and "--bind" in done.stderr


@pytest.mark.parametrize("bad", [["--workers", "0"], ["--metrics", "loud"], ["--host-down-after", "0"]])
def test_a_wrong_setting_is_a_usage_error(bad):
    # Click's own checks return the status; the settings' checks exit with it.
    try:
        status = main(["conductor", *bad])
    except SystemExit as exit:
        status = exit.code
    assert status == 2


def test_a_plain_postgresql_url_reaches_psycopg(postgres_server):
    from berth.conductor.journal import Journal

    plain = postgres_server.create_database("conductor_plain_url").replace("postgresql+psycopg://", "postgresql://")
    journal = Journal(plain)
    try:
        assert journal.engine.dialect.driver == "psycopg"
        assert journal.running() == []
    finally:
        journal.close()


def test_the_cors_origins_come_from_the_options_or_the_environment():
    assert load_settings({}, {}).cors_allowed_origin == ()
    environ = {"BERTH_CORS_ALLOWED_ORIGIN": "https://a.example, https://b.example"}
    assert load_settings({}, environ).cors_allowed_origin == ("https://a.example", "https://b.example")
    chosen = load_settings({"cors_allowed_origin": ("https://c.example",)}, environ)
    assert chosen.cors_allowed_origin == ("https://c.example",)


def test_the_conductors_guide_lists_the_settings_as_declared():
    from pathlib import Path

    guide = (Path(__file__).parent.parent / "docs" / "conductor.md").read_text()
    table = settings.reference_table(ConductorSettings)
    assert table in guide, "docs/conductor.md's table of `berth conductor` settings is out of date:\n" + table
