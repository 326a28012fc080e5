"""``berth quota list`` names the users with limits of their own, as ``berth quota show`` does."""

from __future__ import annotations

from typing import Any

from click.testing import CliRunner

from berth.cli.client.connection import Api
from berth.cli.main import cli

QUOTAS = {
    "quotas": [
        {
            "project_id": "demo",
            "limits": {},
            "usage": {"VCPU": 2, "consumers": 1},
            "users": ["alice"],
        },
        {"project_id": "other", "limits": {"VCPU": 8}, "usage": {"VCPU": 4}, "users": []},
    ]
}


def test_quota_list_names_a_projects_users_with_limits(monkeypatch):
    asked: list[str] = []

    def get(_api: Api, path: str) -> Any:
        asked.append(path)
        return QUOTAS

    monkeypatch.setattr(Api, "get", get)
    result = CliRunner().invoke(cli, ["quota", "list", "--url", "http://127.0.0.1:1"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert asked == ["/berth/quotas"]
    # A project whose only limits are its users' has no row of its own: the users are named below.
    assert "users of project demo with limits of their own: alice" in result.output
    assert "users of project other" not in result.output
