"""How ``berth serve`` turns its command line, configuration file and environment into settings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from apihelpers import Api, reshape_new_provider

from berth.api import server
from berth.api.app import PlacementApp
from berth.cli import main, settings
from berth.cli.services.serve import ServeSettings


@pytest.fixture
def started(monkeypatch):
    """What ``berth serve`` would start the server with (every keyword of ``server.serve``)."""
    captured = {}

    def fake_serve(**kwargs):
        captured.update(kwargs)
        return 0

    monkeypatch.setattr(server, "serve", fake_serve)
    for name in list(os.environ):
        if name.startswith("BERTH_"):
            monkeypatch.delenv(name)

    def run(*argv):
        captured.clear()
        assert main.main(["serve", *argv]) == 0
        return captured

    return run


@pytest.fixture
def served(started):
    """The settings ``berth serve`` would start the server with."""
    return lambda *argv: started(*argv)["settings"]


@pytest.fixture
def refused(monkeypatch, capsys):
    """The message ``berth serve`` refuses to start with (exit status 2, returned or raised as argparse does)."""
    monkeypatch.setattr(server, "serve", lambda **kwargs: pytest.fail(f"the server was started with {kwargs}"))
    for name in list(os.environ):
        if name.startswith("BERTH_"):
            monkeypatch.delenv(name)

    def run(*argv):
        try:
            status = main.main(["serve", *argv])
        except SystemExit as exit:
            status = exit.code
        assert status == 2
        return capsys.readouterr().err

    return run


def config_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "serve.yaml"
    path.write_text(text)
    return str(path)


def test_provider_cache_size_defaults_to_ten_thousand(served):
    assert served().provider_cache_size == 10_000


def test_provider_cache_size_zero_on_the_command_line_means_none(served, monkeypatch):
    monkeypatch.setenv("BERTH_PROVIDER_CACHE_SIZE", "500")
    assert served("--provider-cache-size", "0").provider_cache_size == 0


def test_provider_cache_size_from_the_environment_and_the_file(served, monkeypatch, tmp_path):
    monkeypatch.setenv("BERTH_PROVIDER_CACHE_SIZE", "500")
    assert served().provider_cache_size == 500
    config = tmp_path / "serve.yaml"
    config.write_text("provider_cache_size: 0\n")
    assert served("--config", str(config)).provider_cache_size == 0


# ---- precedence: command line > file > environment > default -----------------------------------


def test_each_layer_gives_way_only_to_the_ones_above_it(started, monkeypatch, tmp_path):
    assert started()["settings"].max_candidates == 1000
    monkeypatch.setenv("BERTH_MAX_CANDIDATES", "9")
    assert started()["settings"].max_candidates == 9
    config = config_file(tmp_path, "max_candidates: 8\n")
    assert started("--config", config)["settings"].max_candidates == 8
    assert started("--config", config, "--max-candidates", "7")["settings"].max_candidates == 7


def test_every_server_setting_comes_from_the_environment_too(started, monkeypatch):
    for name, value in {
        "BERTH_BIND": "127.0.0.2:9000",
        "BERTH_DATABASE_URL": "sqlite:///elsewhere.sqlite",
        "BERTH_WORKERS": "2",
        "BERTH_THREADS": "5",
        "BERTH_ACCESS_LOG": "yes",
        "BERTH_CORS_ALLOWED_ORIGIN": "https://a.example, https://b.example",
    }.items():
        monkeypatch.setenv(name, value)
    call = started()
    assert (call["bind"], call["database_url"], call["workers"], call["threads"], call["access_log"]) == (
        "127.0.0.2:9000",
        "sqlite:///elsewhere.sqlite",
        2,
        5,
        True,
    )
    assert call["settings"].cors_allowed_origins == ("https://a.example", "https://b.example")


def test_file_and_command_line_keep_their_option_names_and_forms(started, monkeypatch, tmp_path):
    monkeypatch.setenv("BERTH_CORS_ALLOW_HEADERS", "X-From-Env")
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("tokens:\n  secret: {user_id: alice, roles: [reader]}\n")
    config = config_file(
        tmp_path,
        f"bind: 127.0.0.3:8778\nauth-strategy: tokens\ntokens_file: {tokens}\n"
        "cors_allowed_origin: [https://dash.example]\n"
        "cors_allow_headers: X-One, X-Two\nenforce_new_defaults: true\nthreads: 3\n",
    )
    call = started(
        "--config", config, "--cors-allowed-origin", "https://a.example", "--cors-allowed-origin", "https://b.example"
    )
    applied = call["settings"]
    assert call["bind"] == "127.0.0.3:8778" and call["threads"] == 3
    assert applied.auth_strategy == "tokens" and applied.enforce_new_defaults is True
    assert applied.cors_allowed_origins == ("https://a.example", "https://b.example")
    assert applied.cors_allow_headers == ("X-One", "X-Two")


def test_false_in_the_file_overrides_true_in_the_environment(served, monkeypatch, tmp_path):
    monkeypatch.setenv("BERTH_RANDOMIZE_CANDIDATES", "1")
    assert served().randomize_candidates is True
    assert served("--config", config_file(tmp_path, "randomize_candidates: false\n")).randomize_candidates is False


def test_an_empty_environment_variable_counts_as_unset(served, monkeypatch):
    monkeypatch.setenv("BERTH_MAX_CANDIDATES", "")
    assert served().max_candidates == 1000


# ---- zero is a value, never "not given" --------------------------------------------------------


def test_zero_on_the_command_line_is_refused_not_replaced_by_the_file(refused, tmp_path):
    config = config_file(tmp_path, "max_candidates: 50\nworkers: 3\n")
    assert "--max-candidates: must be at least 1, got 0" in refused("--config", config, "--max-candidates", "0")
    assert "--workers: must be at least 1, got 0" in refused("--config", config, "--workers", "0")
    assert "--threads: must be at least 1, got 0" in refused("--threads", "0")


def test_zero_in_the_file_or_the_environment_is_refused_by_name(refused, monkeypatch, tmp_path):
    config = config_file(tmp_path, "workers: 0\n")
    assert f"{config}: workers: must be at least 1, got 0" in refused("--config", config)
    monkeypatch.setenv("BERTH_MAX_CANDIDATES", "0")
    assert "$BERTH_MAX_CANDIDATES: must be at least 1, got 0" in refused()


def test_zero_cache_in_each_layer_beats_the_layers_below(served, monkeypatch, tmp_path):
    monkeypatch.setenv("BERTH_PROVIDER_CACHE_SIZE", "0")
    assert served().provider_cache_size == 0
    monkeypatch.setenv("BERTH_PROVIDER_CACHE_SIZE", "7")
    config = config_file(tmp_path, "provider_cache_size: 50\n")
    assert served("--config", config, "--provider-cache-size", "0").provider_cache_size == 0


# ---- errors name the setting and what to do ----------------------------------------------------


def test_an_unknown_key_in_the_file_is_named_with_the_likely_one(refused, tmp_path):
    config = config_file(tmp_path, "worker: 2\n")
    message = refused("--config", config)
    assert f"{config}: unknown setting 'worker'; did you mean 'workers'?" in message
    assert "the settings are: bind, database, workers" in message


def test_bad_values_name_their_source_and_the_expected_form(refused, monkeypatch, tmp_path):
    assert "expected a whole number, got 'four'" in refused("--config", config_file(tmp_path, "workers: four\n"))
    assert "auth_strategy: 'token' is not one of noauth2, tokens, keystone" in refused(
        "--config", config_file(tmp_path, "auth_strategy: token\n")
    )
    assert "bind: expected text, got 8778 (quote it in YAML)" in refused(
        "--config", config_file(tmp_path, "bind: 8778\n")
    )
    assert "expected a mapping" in refused("--config", config_file(tmp_path, "- workers\n"))
    assert "--max-candidates: expected a whole number, got 'x'" in refused("--max-candidates", "x")
    monkeypatch.setenv("BERTH_ENFORCE_NEW_DEFAULTS", "maybe")
    assert "$BERTH_ENFORCE_NEW_DEFAULTS: expected true or false" in refused()


def test_a_missing_file_is_named(refused, tmp_path):
    assert f"{tmp_path / 'nowhere.yaml'}: cannot read it" in refused("--config", str(tmp_path / "nowhere.yaml"))


def test_noauth2_beyond_loopback_is_still_refused_unless_forced(refused, started, tmp_path):
    assert "refusing to serve the noauth2 development mode on 0.0.0.0" in refused("--bind", "0.0.0.0:8778")
    forced = config_file(tmp_path, "force_insecure: true\n")
    assert started("--bind", "0.0.0.0:8778", "--config", forced)["bind"] == "0.0.0.0:8778"


# ---- the policy's defaults: Placement's secure RBAC, the legacy rules one setting away ------------


def _plain_admin_reshapes(db, applied) -> int:
    return reshape_new_provider(Api(PlacementApp(db, applied))).status_code


def test_the_new_defaults_are_enforced_by_default(served, db):
    applied = served()
    assert applied.enforce_new_defaults is True
    assert _plain_admin_reshapes(db, applied) == 403


@pytest.mark.parametrize("where", ["flag", "file", "environment"])
def test_the_legacy_rules_are_one_setting_away(served, monkeypatch, tmp_path, db, where):
    if where == "flag":
        applied = served("--no-enforce-new-defaults")
    elif where == "file":
        applied = served("--config", config_file(tmp_path, "enforce_new_defaults: false\n"))
    else:
        monkeypatch.setenv("BERTH_ENFORCE_NEW_DEFAULTS", "false")
        applied = served()
    assert applied.enforce_new_defaults is False
    assert _plain_admin_reshapes(db, applied) == 204


def test_the_command_line_turns_the_new_defaults_on_or_off_over_the_file_and_the_environment(
    served, monkeypatch, tmp_path
):
    monkeypatch.setenv("BERTH_ENFORCE_NEW_DEFAULTS", "true")
    assert served("--no-enforce-new-defaults").enforce_new_defaults is False
    legacy = config_file(tmp_path, "enforce_new_defaults: false\n")
    assert served("--config", legacy, "--enforce-new-defaults").enforce_new_defaults is True


# ---- one definition for the options, the file, the environment and the README -----------------


def test_every_serve_setting_has_an_environment_variable():
    assert [item.name for item in settings.declared(ServeSettings) if not item.spec.env] == []


def test_the_readme_lists_the_settings_as_declared():
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    table = settings.reference_table(ServeSettings)
    assert table in readme, "README.md's table of `berth serve` settings is out of date; it should read:\n" + table


def test_the_default_workers_are_no_more_than_the_cores():
    # Granian warns on every start when the workers outnumber the cores.
    assert 1 <= ServeSettings().workers <= min(4, os.cpu_count() or 1)


def test_the_dashboard_conductor_comes_from_the_option_or_the_environment(started, monkeypatch):
    assert started()["settings"].dashboard_conductor is None
    monkeypatch.setenv("BERTH_DASHBOARD_CONDUCTOR", "http://conductor.example:8774")
    assert started()["settings"].dashboard_conductor == "http://conductor.example:8774"
    chosen = started("--dashboard-conductor", "http://other.example:8774")["settings"]
    assert chosen.dashboard_conductor == "http://other.example:8774"


def test_the_pick_board_is_on_unless_turned_off_by_option_or_environment(started, monkeypatch):
    assert started()["settings"].pick_board is True
    assert started("--no-pick-board")["settings"].pick_board is False
    monkeypatch.setenv("BERTH_PICK_BOARD", "false")
    assert started()["settings"].pick_board is False
    assert started("--pick-board")["settings"].pick_board is True
