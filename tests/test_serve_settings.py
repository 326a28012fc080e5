"""How ``berth serve`` turns its command line, configuration file and environment into settings."""

from __future__ import annotations

import pytest

from berth.api import server
from berth.cli import main


@pytest.fixture
def served(monkeypatch):
    """The settings ``berth serve`` would start the server with."""
    captured = {}

    def fake_serve(**kwargs):
        captured.update(kwargs)
        return 0

    monkeypatch.setattr(server, "serve", fake_serve)
    for name in ("BERTH_PROVIDER_CACHE_SIZE", "BERTH_MAX_CANDIDATES"):
        monkeypatch.delenv(name, raising=False)

    def run(*argv):
        assert main.main(["serve", *argv]) == 0
        return captured["settings"]

    return run


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
