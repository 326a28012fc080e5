"""How ``berth agent`` resolves its settings: command line, then its configuration file, then the environment."""

from __future__ import annotations

from typing import Any

import pytest

from berth.cli.services import agent
from berth.cli.settings import SettingsError
from berth.tracker.configuration.config import TrackerConfig


def parse(*argv: str) -> dict[str, Any]:
    return agent.agent_command.make_context("agent", list(argv)).params


def write(tmp_path, text: str) -> str:
    path = tmp_path / "agent.yaml"
    path.write_text(text)
    return str(path)


def test_the_token_comes_from_the_command_line_then_the_file_then_the_environment(tmp_path):
    environ = {"BERTH_AGENT_TOKEN": "from-env"}
    config = write(tmp_path, "agent: {token: from-file}\n")
    assert agent.load_config(parse(), {})[1].agent.token is None
    assert agent.load_config(parse(), environ)[1].agent.token == "from-env"
    assert agent.load_config(parse("--config", config), environ)[1].agent.token == "from-file"
    assert agent.load_config(parse("--config", config, "--token", "cli"), environ)[1].agent.token == "cli"


def test_placement_from_the_environment_unless_given(tmp_path):
    environ = {"BERTH_PLACEMENT_URL": "http://placement.example:8778", "BERTH_PLACEMENT_TOKEN": "svc"}
    settings, _ = agent.load_config(parse(), environ)
    assert (settings.placement, settings.placement_token) == ("http://placement.example:8778", "svc")
    settings, _ = agent.load_config(parse("--placement", "http://127.0.0.2:1"), environ)
    assert settings.placement == "http://127.0.0.2:1"
    assert agent.load_config(parse(), {})[0].placement == "http://127.0.0.1:8778"


def test_the_placement_roles_are_a_service_users_unless_given():
    assert agent.load_config(parse(), {})[0].placement_roles == ("admin", "service")
    environ = {"BERTH_PLACEMENT_ROLES": "service"}
    assert agent.load_config(parse(), environ)[0].placement_roles == ("service",)
    assert agent.load_config(parse("--placement-roles", "admin,service,reader"), environ)[0].placement_roles == (
        "admin",
        "service",
        "reader",
    )
    # An empty list on the command line: no X-Roles, the token's roles alone.
    settings = agent.load_config(parse("--placement-roles", ""), environ)[0]
    assert settings.placement_roles == () and "X-Roles" not in agent.placement_client(settings).headers


def test_zero_audit_interval_is_a_value_in_every_layer(tmp_path):
    assert agent.load_config(parse("--config", write(tmp_path, "audit: {interval: 0}\n")), {})[1].audit.interval == 0
    config = write(tmp_path, "audit: {interval: 5, heal: true}\n")
    _, resolved = agent.load_config(parse("--config", config, "--audit-interval", "0"), {})
    assert (resolved.audit.interval, resolved.audit.heal) == (0, True)
    assert agent.load_config(parse(), {})[1].audit.interval == 60


def test_paths_in_the_file_are_relative_to_it_and_the_command_line_wins(tmp_path):
    config = write(tmp_path, "state_dir: state\nagent: {bind: '127.0.0.1:9100'}\n")
    _, resolved = agent.load_config(parse("--config", config), {})
    assert (resolved.state_dir, resolved.agent.bind) == (str(tmp_path / "state"), "127.0.0.1:9100")
    _, resolved = agent.load_config(parse("--config", config, "--state-dir", "/srv/claims"), {})
    assert resolved.state_dir == "/srv/claims"


def test_bad_values_name_where_they_came_from(tmp_path):
    config = write(tmp_path, "agent: {token: 12345}\n")
    with pytest.raises(SettingsError, match=r"agent\.yaml: token: expected text, got 12345 \(quote it in YAML\)"):
        agent.load_config(parse("--config", config), {})
    with pytest.raises(SettingsError, match=r"--audit-interval: must be at least 0, got -1\.0"):
        agent.load_config(parse("--audit-interval", "-1"), {})
    with pytest.raises(SettingsError, match=r"--audit-interval: expected a number, got 'soon'"):
        agent.load_config(parse("--audit-interval", "soon"), {})


def test_the_defaults_are_the_tracker_configurations_own():
    settings, _ = agent.load_config(parse(), {})
    tracker = TrackerConfig()
    assert (settings.bind, settings.token) == (tracker.agent.bind, tracker.agent.token)
    assert (settings.state_dir, settings.instances_path) == (tracker.state_dir, tracker.instances_path)
    assert (settings.audit_interval, settings.heal) == (tracker.audit.interval, tracker.audit.heal)
