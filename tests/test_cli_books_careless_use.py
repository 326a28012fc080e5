"""The client commands of the books, used as a hurried operator would: odd names, empty arguments,
numbers that are no numbers, options that do not apply, and files and databases that cannot hold books."""

from __future__ import annotations

import json
import uuid as uuid_module

import pytest
from click.testing import CliRunner
from livehelpers import LiveServer

from berth.cli.main import cli, main
from berth.testbed.client import Client

VERSION = "1.39"


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    server = LiveServer(f"sqlite:///{tmp_path_factory.mktemp('books') / 'placement.sqlite'}", workers=1)
    client = Client(server.url, version=VERSION)
    try:
        yield server, client
    finally:
        client.close()
        server.stop()


@pytest.fixture
def berth(live):
    runner = CliRunner()

    def run(*args: str, expect: int = 0):
        result = runner.invoke(cli, list(args), env={"BERTH_URL": live[0].url, "BERTH_TOKEN": None})
        assert result.exit_code == expect, (result.output, result.exception)
        assert "Traceback" not in result.output
        return result

    return run


def provider(client: Client, name: str, inventories: dict | None = None) -> str:
    uuid = str(uuid_module.uuid4())
    client.call("POST", "/resource_providers", {"name": name, "uuid": uuid})
    if inventories:
        client.call(
            "PUT",
            f"/resource_providers/{uuid}/inventories",
            {"resource_provider_generation": 0, "inventories": inventories},
        )
    return uuid


def test_names_that_look_like_rich_markup_are_shown_as_they_are(berth, live):
    client = live[1]
    odd = provider(client, "rack[/b]7", {"VCPU": {"total": 4}})
    coloured = provider(client, "[red]gpu-pool")

    listed = berth("provider", "list").stdout
    assert "rack[/b]7" in listed and "[red]gpu-pool" in listed
    assert "resource provider [red]gpu-pool" in berth("provider", "show", coloured).stdout
    assert "inventory of rack[/b]7" in berth("inventory", "show", odd).stdout
    assert "usage of rack[/b]7" in berth("usage", "show", odd).stdout


def test_an_empty_provider_name_names_no_provider(berth, live):
    client = live[1]
    first = provider(client, "hunt-first", {"VCPU": {"total": 8}})

    assert "no resource provider named or with uuid ''" in berth("provider", "show", "", expect=1).output
    refused = berth("inventory", "set", "", "VCPU", "--total", "2", expect=1)

    assert "no resource provider named or with uuid ''" in refused.output
    assert client.call("GET", f"/resource_providers/{first}/inventories")["inventories"]["VCPU"]["total"] == 8


@pytest.mark.parametrize("ratio", ["nan", "inf", "1e400"])
def test_an_allocation_ratio_that_is_no_finite_number_is_refused(berth, live, ratio):
    client = live[1]
    host = provider(client, f"hunt-ratio-{ratio}", {"VCPU": {"total": 8}})

    refused = berth("inventory", "set", host, "VCPU", "--allocation-ratio", ratio, expect=2)

    assert "--allocation-ratio" in refused.output
    assert client.call("GET", f"/resource_providers/{host}/inventories")["inventories"]["VCPU"]["allocation_ratio"] == 1


def test_a_providers_traits_by_prefix_are_the_same_in_every_format(berth, live):
    client = live[1]
    host = provider(client, "hunt-traits")
    client.call(
        "PUT",
        f"/resource_providers/{host}/traits",
        {"resource_provider_generation": 0, "traits": ["COMPUTE_NODE", "HW_CPU_X86_AVX2"]},
    )

    as_json = json.loads(berth("trait", "list", "--provider", host, "--prefix", "HW_", "-f", "json").stdout)
    table = berth("trait", "list", "--provider", host, "--prefix", "HW_").stdout

    assert as_json["traits"] == ["HW_CPU_X86_AVX2"]
    assert "HW_CPU_X86_AVX2" in table and "COMPUTE_NODE" not in table
    assert "leave out --provider" in berth("trait", "list", "--provider", host, "--associated", expect=2).output


def test_lease_release_of_what_is_not_a_uuid_is_a_usage_error(berth):
    for consumer in ("", "nope"):
        assert "is not a uuid" in berth("lease", "release", consumer, expect=2).output


def test_usage_options_that_do_not_apply_are_refused(berth, live):
    host = provider(live[1], "hunt-usage", {"VCPU": {"total": 2}})

    assert "give them with --project" in berth("usage", "show", host, "--user", "alice", expect=2).output
    assert "not an empty one" in berth("usage", "show", "--project", "", expect=2).output


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///", "sqlite:///:memory:"])
def test_import_and_db_upgrade_refuse_a_database_in_memory(tmp_path, capsys, url):
    source = f"sqlite:///{tmp_path / 'source.sqlite'}"
    books = str(tmp_path / "books.jsonl")
    assert main(["db", "upgrade", "--database", source]) == 0
    assert main(["export", books, "--database", source]) == 0
    capsys.readouterr()

    assert main(["import", books, "--database", url]) == 1
    assert "in memory" in capsys.readouterr().err
    assert main(["db", "upgrade", "--database", url]) == 1
    assert "in memory" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("step_size", 0, "inventory field step_size: must be a whole number from 1"),
        ("allocation_ratio", 1e308, "inventory field allocation_ratio: must be a positive number of at most"),
    ],
)
def test_import_refuses_an_inventory_no_api_could_have_written(tmp_path, capsys, field, value, says):
    source = f"sqlite:///{tmp_path / 'source.sqlite'}"
    server = LiveServer(source, workers=1)
    api = server.client()
    try:
        provider(api, "hunt-import", {"VCPU": {"total": 8, "allocation_ratio": 4.0}})
    finally:
        api.close()
        server.stop()
    books = tmp_path / "books.jsonl"
    assert main(["export", str(books), "--database", source]) == 0
    lines = books.read_text().splitlines()
    edited = []
    for line in lines:
        record = json.loads(line)
        if record.get("kind") == "inventory":
            record[field] = value
        edited.append(json.dumps(record))
    books.write_text("\n".join(edited) + "\n")
    capsys.readouterr()
    target = f"sqlite:///{tmp_path / 'copy.sqlite'}"

    assert main(["import", str(books), "--database", target]) == 1

    assert says in capsys.readouterr().err
    assert main(["export", str(tmp_path / "copy.jsonl"), "--database", target]) == 0
    assert capsys.readouterr().err.splitlines()[-1] == "exported nothing"
