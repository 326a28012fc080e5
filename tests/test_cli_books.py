"""``berth export``, ``berth import`` and ``berth compare`` as an operator runs them: a server's books
copied into a second database, served there, and the two servers compared."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid as uuid_module

import pytest
from click.testing import CliRunner
from livehelpers import LiveServer

from berth.cli.main import cli
from berth.testbed.client import Client

pytestmark = pytest.mark.slow


def _new_uuid() -> str:
    return str(uuid_module.uuid4())


def _populate(url: str) -> str:
    """A host with a child, a custom class and trait, and an allocation; the host's uuid."""
    client = Client(url, version="latest")
    try:
        host, child = _new_uuid(), _new_uuid()
        client.call("PUT", "/resource_classes/CUSTOM_BOOKS_GPU", expect=(201, 204))
        client.call("PUT", "/traits/CUSTOM_BOOKS_FAST", expect=(201, 204))
        client.call("POST", "/resource_providers", {"name": "books-host", "uuid": host})
        client.call("POST", "/resource_providers", {"name": "books-gpu", "uuid": child, "parent_provider_uuid": host})
        client.call(
            "PUT",
            f"/resource_providers/{host}/inventories",
            {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 4096}}},
        )
        client.call(
            "PUT",
            f"/resource_providers/{child}/inventories",
            {"resource_provider_generation": 0, "inventories": {"CUSTOM_BOOKS_GPU": {"total": 2}}},
        )
        client.call(
            "PUT",
            f"/resource_providers/{child}/traits",
            {"resource_provider_generation": 1, "traits": ["CUSTOM_BOOKS_FAST"]},
        )
        client.call(
            "PUT",
            f"/allocations/{_new_uuid()}",
            {
                "allocations": {host: {"resources": {"VCPU": 2}}, child: {"resources": {"CUSTOM_BOOKS_GPU": 1}}},
                "project_id": "books-project",
                "user_id": "books-user",
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            },
            expect=(204,),
        )
    finally:
        client.close()
    return host


def _records(path) -> list[str]:
    """The file's records, without its header (which says when it was written)."""
    return path.read_text().splitlines()[1:]


def test_export_import_serve_and_compare(tmp_path):
    runner = CliRunner()
    source_url = f"sqlite:///{tmp_path / 'source.sqlite'}"
    copy_url = f"sqlite:///{tmp_path / 'copy.sqlite'}"
    source = LiveServer(source_url, workers=1)
    copy = None
    try:
        host = _populate(source.url)
        exported = tmp_path / "books.jsonl"
        done = runner.invoke(cli, ["export", str(exported), "--database", source_url])
        assert done.exit_code == 0, done.output
        assert any(host in line for line in _records(exported))

        done = runner.invoke(cli, ["import", str(exported), "--database", copy_url])
        assert done.exit_code == 0, done.output

        again = tmp_path / "again.jsonl"
        assert runner.invoke(cli, ["export", str(again), "--database", copy_url]).exit_code == 0
        assert _records(again) == _records(exported)

        copy = LiveServer(copy_url, workers=1)
        done = runner.invoke(cli, ["compare", source.url, copy.url])
        assert done.exit_code == 0, done.output

        # A difference planted on one side is found, and the command says so by its status.
        client = copy.client()
        try:
            generation = client.call("GET", f"/resource_providers/{host}/inventories")["resource_provider_generation"]
            client.call(
                "PUT",
                f"/resource_providers/{host}/inventories",
                {
                    "resource_provider_generation": generation,
                    "inventories": {"VCPU": {"total": 16}, "MEMORY_MB": {"total": 4096}},
                },
            )
        finally:
            client.close()
        done = runner.invoke(cli, ["compare", source.url, copy.url])
        assert done.exit_code == 1
        assert host in done.output and "16" in done.output
    finally:
        source.stop()
        if copy is not None:
            copy.stop()


def test_import_refuses_a_database_with_books_and_writes_nothing(tmp_path):
    runner = CliRunner()
    url = f"sqlite:///{tmp_path / 'full.sqlite'}"
    server = LiveServer(url, workers=1)
    try:
        _populate(server.url)
    finally:
        server.stop()
    exported = tmp_path / "books.jsonl"
    assert runner.invoke(cli, ["export", str(exported), "--database", url]).exit_code == 0

    done = runner.invoke(cli, ["import", str(exported), "--database", url])

    assert done.exit_code == 1
    assert "--merge" in done.output
    same = tmp_path / "same.jsonl"
    assert runner.invoke(cli, ["export", str(same), "--database", url]).exit_code == 0
    assert _records(same) == _records(exported)


def test_import_needs_a_file_or_a_placement(tmp_path):
    done = CliRunner().invoke(cli, ["import", "--database", f"sqlite:///{tmp_path / 'x.sqlite'}"])
    assert done.exit_code == 2
    assert "give either FILE or --from-placement URL" in done.output


def test_off_a_terminal_export_and_import_print_their_summary_without_bars(tmp_path):
    environment = {name: value for name, value in os.environ.items() if name not in ("FORCE_COLOR", "TTY_COMPATIBLE")}

    def berth(*args: str) -> str:
        """``berth ARGS`` with its standard error a pipe; what it wrote there."""
        done = subprocess.run(
            [sys.executable, "-m", "berth.cli.main", *args],
            capture_output=True,
            text=True,
            env=environment,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stderr

    source, books = f"sqlite:///{tmp_path / 'source.sqlite'}", str(tmp_path / "books.jsonl")
    berth("db", "upgrade", "--database", source)
    for printed, summary in (
        (berth("export", books, "--database", source), "exported nothing"),
        (berth("import", books, "--database", f"sqlite:///{tmp_path / 'copy.sqlite'}"), "imported nothing"),
    ):
        assert "━" not in printed and "0:00:00" not in printed, printed
        assert printed.splitlines()[-1] == summary
