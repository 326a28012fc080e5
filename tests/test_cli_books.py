"""``berth export``, ``berth import`` and ``berth compare`` as an operator runs them: a server's books
copied into a second database, served there, and the two servers compared."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid as uuid_module

import pytest
import sqlalchemy
from click.testing import CliRunner
from livehelpers import LiveServer, free_port

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
        # A merge says what it added, not what the file holds.
        (
            berth("import", books, "--merge", "--database", f"sqlite:///{tmp_path / 'copy.sqlite'}"),
            "merged: added nothing; the file's other records were there already",
        ),
    ):
        assert "━" not in printed and "0:00:00" not in printed, printed
        assert printed.splitlines()[-1] == summary


# ---- what the commands say when they cannot do their work ------------------------------------------


def test_export_of_a_folder_without_books_says_so_and_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BERTH_DATABASE_URL", raising=False)

    done = CliRunner().invoke(cli, ["export", "books.jsonl"])

    assert done.exit_code == 1
    assert done.output.strip() == (
        "Error: no Berth books at sqlite:///berth.sqlite (no such SQLite file): check --database "
        "(or $BERTH_DATABASE_URL)"
    )
    assert list(tmp_path.iterdir()) == []


def test_export_of_a_sqlite_file_without_the_schema_says_so_and_creates_nothing(tmp_path):
    empty = tmp_path / "empty.sqlite"
    empty.touch()

    done = CliRunner().invoke(cli, ["export", str(tmp_path / "books.jsonl"), "--database", f"sqlite:///{empty}"])

    assert done.exit_code == 1
    assert "no Berth books at sqlite:///" in done.output and "(the database has no Berth schema)" in done.output
    assert isinstance(done.exception, SystemExit)  # said, not raised
    assert sorted(path.name for path in tmp_path.iterdir()) == ["empty.sqlite"]
    assert empty.stat().st_size == 0


def test_export_of_an_empty_postgresql_database_says_so(postgres_server, tmp_path):
    url = postgres_server.create_database(f"books_empty_{_new_uuid()[:8]}")

    done = CliRunner().invoke(cli, ["export", str(tmp_path / "books.jsonl"), "--database", url])

    assert done.exit_code == 1
    assert "(the database has no Berth schema): check --database" in done.output
    password = sqlalchemy.engine.make_url(url).password
    assert not password or str(password) not in done.output
    assert not (tmp_path / "books.jsonl").exists()


def test_reading_a_placement_that_is_not_there_is_one_error_naming_the_url(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    database = tmp_path / "target.sqlite"

    done = CliRunner().invoke(cli, ["import", "--from-placement", url, "--database", f"sqlite:///{database}"])

    assert done.exit_code == 1
    assert f"Error: cannot reach Placement at {url}: connection refused" in done.output
    # The source is an OpenStack Placement: what to check of it, not to start a Berth service.
    assert "hint: check the URL given as --from-placement" in done.output and "berth serve" not in done.output
    assert isinstance(done.exception, SystemExit)
    assert not database.exists()

    done = CliRunner().invoke(cli, ["compare", url, "http://127.0.0.1:9"])
    assert done.exit_code == 2
    assert f"cannot reach Placement at {url}" in done.output and "hint: check FIRST_URL" in done.output
    assert "berth serve" not in done.output


def test_compare_and_import_refusals_name_the_url_and_what_to_check(tmp_path):
    runner = CliRunner()
    server = LiveServer(f"sqlite:///{tmp_path / 'served.sqlite'}", workers=1)
    try:
        # A token without the admin role: the reads are refused, and the hint names the token option.
        done = runner.invoke(cli, ["compare", server.url, server.url, "--second-token", "alice"])
        assert done.exit_code == 2, done.output
        assert "answered 403" in done.output and "hint: the token lacks the role" in done.output
        assert "--second-token" in done.output

        done = runner.invoke(
            cli,
            ["import", "--from-placement", server.url, "--token", "alice", "--database", f"sqlite:///{tmp_path / 'x'}"],
        )
        assert done.exit_code == 1
        assert "answered 403" in done.output and "with --token" in done.output
        assert done.output.rstrip().endswith("Nothing was written.")

        # A URL that is not Placement's endpoint: its path is named as the thing to check.
        wrong = server.url + "/placement"
        done = runner.invoke(cli, ["compare", server.url, wrong])
        assert done.exit_code == 2
        assert f"the service at {wrong} has no such path: is SECOND_URL Placement's endpoint itself?" in done.output

        # The same books on both sides: 0, as before.
        assert runner.invoke(cli, ["compare", server.url, server.url]).exit_code == 0
    finally:
        server.stop()


def test_the_advice_of_an_import_refused_is_said_once_and_after_a_full_stop(tmp_path):
    runner = CliRunner()
    url = f"sqlite:///{tmp_path / 'full.sqlite'}"
    books = tmp_path / "books.jsonl"
    assert runner.invoke(cli, ["import", str(_write_books(books, used=1)), "--database", url]).exit_code == 0

    done = runner.invoke(cli, ["import", str(books), "--database", url])
    assert done.exit_code == 1
    assert done.output.count("--merge") == 1 and "merge into this one" not in done.output
    assert (
        "already holds books (" in done.output and "). Import into an empty database, or give --merge." in done.output
    )

    # An allocation of nothing, which the API would refuse to write: refused with its line, nothing written.
    empty = f"sqlite:///{tmp_path / 'empty.sqlite'}"
    done = runner.invoke(cli, ["import", str(_write_books(tmp_path / "zero.jsonl", used=0)), "--database", empty])
    assert done.exit_code == 1
    assert "line 7: allocation field used: must be a whole number from 1 to" in done.output
    assert "not 0. Nothing was written." in done.output
    assert runner.invoke(cli, ["export", str(tmp_path / "after.jsonl"), "--database", empty]).exit_code == 0
    assert not any('"kind":"provider"' in line for line in _records(tmp_path / "after.jsonl"))


def _write_books(path, *, used: int):
    """A snapshot of one provider with one consumer's allocation of ``used`` DISK_GB."""
    provider, consumer = _new_uuid(), _new_uuid()
    lines = [
        {
            "format": "berth-books",
            "version": 2,
            "counts": dict.fromkeys(("provider", "inventory", "project", "user", "consumer", "allocation"), 1),
        },
        {"kind": "provider", "uuid": provider, "name": "books-disk", "generation": 1, "parent": None, "root": provider},
        {
            "kind": "inventory",
            "provider": provider,
            "resource_class": "DISK_GB",
            "total": 100,
            "reserved": 0,
            "min_unit": 1,
            "max_unit": 100,
            "step_size": 1,
            "allocation_ratio": 1.0,
        },
        {"kind": "project", "external_id": "books-project"},
        {"kind": "user", "external_id": "books-user"},
        {
            "kind": "consumer",
            "uuid": consumer,
            "project": "books-project",
            "user": "books-user",
            "consumer_type": None,
            "generation": 1,
        },
        {"kind": "allocation", "consumer": consumer, "provider": provider, "resource_class": "DISK_GB", "used": used},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path
