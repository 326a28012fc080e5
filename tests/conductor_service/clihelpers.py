"""The ``berth`` command run in process against a module's live conductors (both of them), for the
CLI's live tests."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from click.testing import CliRunner, Result

from berth.cli.main import cli

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"

Berth = Callable[..., Result]


def berth_against(cloud) -> Berth:
    """Run ``berth ARGS`` against both conductors; the result, its exit status checked (on another,
    the whole output and the faults of the servers it names: a repr of them is cut short)."""
    runner = CliRunner()
    urls = ",".join(c.url for c in cloud.conductors)
    env = {"BERTH_CONDUCTOR_URL": urls, "BERTH_TOKEN": None}

    def run(*args: str, expect: int = 0) -> Result:
        result = runner.invoke(cli, list(args), env=env)
        if result.exit_code != expect:
            faults = [
                f"{server}: {runner.invoke(cli, ['server', 'show', server], env=env).output}"
                for server in sorted(set(re.findall(UUID, result.output)))
            ]
            pytest.fail(f"exit {result.exit_code}, not {expect}:\n{result.output}\n{result.exception!r}\n{faults}")
        return result

    return run


def as_json(result: Result) -> dict:
    return json.loads(result.stdout)


def create(berth: Berth, name: str, *args: str) -> dict:
    """A server built through the CLI with --wait; its view."""
    return as_json(berth("server", "create", name, "--flavor", "small", "--wait", "-f", "json", *args))["server"]


def cleaned_after_evacuation(berth: Berth, host: str, server_id: str) -> None:
    """Once the agent of ``host``, killed for an evacuation of ``server_id``, is started again: the
    host up, the server's evacuation cleaned up on its source (the housekeeping's next round once
    the host is up: until then the old guest's claim holds its room there, which the tests after
    count on), then the server deleted."""
    from servicehelpers import wait_for

    wait_for(lambda: as_json(berth("host", "show", host, "-f", "json"))["host"]["state"] == "up", what="up again")

    def cleaned_up() -> bool:
        listed = berth("operation", "list", "--server", server_id, "--kind", "clean_up_evacuated", "-f", "json")
        return any(o["state"] == "done" for o in as_json(listed)["operations"])

    wait_for(cleaned_up, what="the evacuation cleaned up on its source")
    berth("server", "delete", server_id, "--wait")
