"""The client commands of ``berth`` against a real ``berth serve``, populated through the API."""

from __future__ import annotations

import json
import re
import uuid as uuid_module

import pytest
import yaml
from click.testing import CliRunner
from livehelpers import LiveServer, free_port

from berth.cli.main import cli, main
from berth.testbed.client import Client

VERSION = "1.39"
PROJECT = "tenant-a"


def new_uuid() -> str:
    return str(uuid_module.uuid4())


class Cloud:
    """What the module's server holds: one compute host with a NUMA cell and a GPU below it."""

    def __init__(self, client: Client):
        self.client = client
        self.host = self.provider(
            "cli-compute1",
            {"VCPU": {"total": 16, "allocation_ratio": 4.0}, "MEMORY_MB": {"total": 8192, "reserved": 512}},
        )
        self.numa = self.provider("cli-compute1-numa0", {"PCPU": {"total": 8}}, parent=self.host)
        self.gpu = self.provider("cli-compute1-gpu0", {"VGPU": {"total": 4}}, parent=self.host)
        self.lonely = self.provider("cli-storage", {"DISK_GB": {"total": 1000}})
        client.call("PUT", "/traits/CUSTOM_CLI_FAST", expect=(201, 204))
        client.call(
            "PUT",
            f"/resource_providers/{self.gpu}/traits",
            {"resource_provider_generation": 1, "traits": ["CUSTOM_CLI_FAST"]},
        )
        self.consumer = new_uuid()
        self.allocate(self.consumer, {self.host: {"VCPU": 6, "MEMORY_MB": 2048}, self.gpu: {"VGPU": 1}})

    def provider(self, name: str, inventories: dict, parent: str | None = None) -> str:
        uuid = new_uuid()
        body = {"name": name, "uuid": uuid} | ({"parent_provider_uuid": parent} if parent else {})
        self.client.call("POST", "/resource_providers", body)
        self.client.call(
            "PUT",
            f"/resource_providers/{uuid}/inventories",
            {"resource_provider_generation": 0, "inventories": inventories},
        )
        return uuid

    def allocate(self, consumer: str, allocations: dict) -> None:
        body = {
            "allocations": {rp: {"resources": resources} for rp, resources in allocations.items()},
            "project_id": PROJECT,
            "user_id": "alice",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        }
        self.client.call("PUT", f"/allocations/{consumer}", body, expect=(204,))

    def get(self, path: str):
        return self.client.call("GET", path)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    server = LiveServer(f"sqlite:///{tmp_path_factory.mktemp('cli') / 'placement.sqlite'}", workers=2)
    client = Client(server.url, version=VERSION)
    try:
        yield server, Cloud(client)
    finally:
        client.close()
        server.stop()


@pytest.fixture
def cloud(live):
    return live[1]


@pytest.fixture
def berth(live):
    """Run ``berth ARGS`` against the module's server; the result of Click's runner."""
    runner = CliRunner()

    def run(*args: str, expect: int = 0):
        result = runner.invoke(cli, list(args), env={"BERTH_URL": live[0].url, "BERTH_TOKEN": None})
        assert result.exit_code == expect, (result.output, result.exception)
        return result

    return run


def as_json(result):
    return json.loads(result.stdout)


def rows(text: str) -> list[list[str]]:
    """A Rich table's body rows as lists of cells."""
    cells = []
    for line in text.splitlines():
        if "│" in line:
            cells.append([cell.strip() for cell in line.strip().strip("│").split("│")])
    return cells


# ---- providers -----------------------------------------------------------------------------------


def test_provider_list_tables_and_dumps_what_the_api_lists(berth, cloud):
    table = berth("provider", "list").stdout
    by_uuid = {row[0]: row for row in rows(table)}
    gpu = cloud.get(f"/resource_providers/{cloud.gpu}")
    assert by_uuid[cloud.gpu][1:] == ["cli-compute1-gpu0", str(gpu["generation"]), cloud.host]
    assert by_uuid[cloud.host][1:] == [
        "cli-compute1",
        str(cloud.get(f"/resource_providers/{cloud.host}")["generation"]),
        "-",
    ]
    assert as_json(berth("provider", "list", "-f", "json")) == cloud.get("/resource_providers")
    assert yaml.safe_load(berth("provider", "list", "-f", "yaml").stdout) == cloud.get("/resource_providers")


def test_provider_list_filters_as_the_api(berth, cloud):
    listed = as_json(berth("provider", "list", "--in-tree", cloud.gpu, "--required", "CUSTOM_CLI_FAST", "-f", "json"))
    assert [p["uuid"] for p in listed["resource_providers"]] == [cloud.gpu]


def test_provider_show_by_name_or_uuid_with_inventory_usage_and_traits(berth, cloud):
    text = berth("provider", "show", "cli-compute1").stdout
    inventory = {row[0]: row[1:] for row in rows(text) if row[0] in ("VCPU", "MEMORY_MB")}
    # capacity, used, total, reserved
    assert inventory == {"VCPU": ["64", "6", "16", "0"], "MEMORY_MB": ["7680", "2048", "8192", "512"]}
    assert "CUSTOM_CLI_FAST" in berth("provider", "show", cloud.gpu).stdout
    assert as_json(berth("provider", "show", cloud.host, "-f", "json")) == cloud.get(
        f"/resource_providers/{cloud.host}"
    )


def test_provider_tree_draws_the_children_under_their_root(berth, cloud):
    lines = berth("provider", "tree", "cli-compute1-numa0").stdout.splitlines()
    root = next(i for i, line in enumerate(lines) if "cli-compute1 " in line)
    gpu = next(line for line in lines if "cli-compute1-gpu0" in line)
    numa = next(i for i, line in enumerate(lines) if "cli-compute1-numa0" in line)
    assert root < numa and lines[root].startswith("cli-compute1") and re.match(r"^[├└]── cli-compute1-", lines[numa])
    assert "VGPU 1/4" in gpu and "VCPU 6/64" in lines[root] and "MEMORY_MB 2048/7680" in lines[root]
    assert "cli-storage" not in "\n".join(lines)
    dumped = as_json(berth("provider", "tree", cloud.host, "-f", "json"))
    assert dumped == cloud.get(f"/resource_providers?in_tree={cloud.host}")


# ---- inventory, traits, usages, allocations --------------------------------------------------------


def test_inventory_show_has_the_apis_numbers(berth, cloud):
    table = {row[0]: row[1:] for row in rows(berth("inventory", "show", "cli-compute1").stdout)}
    # total, reserved, min_unit, max_unit, step_size, allocation_ratio, capacity
    assert table["VCPU"] == ["16", "0", "1", "2147483647", "1", "4", "64"]
    path = f"/resource_providers/{cloud.host}/inventories"
    assert as_json(berth("inventory", "show", cloud.host, "-f", "json")) == cloud.get(path)


def test_inventory_set_changes_one_class_and_keeps_the_others(berth, cloud):
    storage = cloud.provider("cli-set-target", {"DISK_GB": {"total": 100, "reserved": 5}})
    berth("inventory", "set", "cli-set-target", "DISK_GB", "--total", "200")
    written = as_json(
        berth("inventory", "set", storage, "CUSTOM_CLI_SLOTS", "--total", "3", "--create-class", "-f", "json")
    )
    assert written == cloud.get(f"/resource_providers/{storage}/inventories")
    inventories = written["inventories"]
    assert (inventories["DISK_GB"]["total"], inventories["DISK_GB"]["reserved"]) == (200, 5)
    assert inventories["CUSTOM_CLI_SLOTS"]["total"] == 3
    refused = berth("inventory", "set", storage, "VCPU", "--reserved", "1", expect=2)
    assert "has no VCPU inventory yet: give its --total" in refused.stderr


def test_inventory_set_refuses_a_class_the_service_does_not_know(berth, cloud):
    storage = cloud.provider("cli-typo-target", {"DISK_GB": {"total": 100}})
    for name, hint in (("CUSTOM_CLI_NOPE", "--create-class"), ("VCPUS", "the os-resource-classes library names")):
        refused = berth("inventory", "set", storage, name, "--total", "3", expect=1)
        assert f"the service has no resource class {name}" in refused.stderr
        assert hint in refused.stderr
        # Nothing was written: neither the class (below) nor the inventory.
        assert cloud.get(f"/resource_providers/{storage}/inventories")["inventories"].keys() == {"DISK_GB"}
    classes = [rc["name"] for rc in cloud.get("/resource_classes")["resource_classes"]]
    assert "CUSTOM_CLI_NOPE" not in classes and "VCPUS" not in classes


def test_inventory_set_refused_for_its_values_creates_no_class(berth, cloud):
    storage = cloud.provider("cli-half-target", {"DISK_GB": {"total": 100}})
    args = ("inventory", "set", storage, "CUSTOM_CLI_HALF", "--total", "20", "--min-unit", "10", "--max-unit", "2")
    refused = berth(*args, "--create-class", expect=2)
    assert "the minimum unit is greater than the maximum unit" in refused.stderr
    refused = berth("inventory", "set", storage, "CUSTOM_CLI_HALF", "--reserved", "1", "--create-class", expect=2)
    assert "has no CUSTOM_CLI_HALF inventory yet: give its --total" in refused.stderr
    classes = [rc["name"] for rc in cloud.get("/resource_classes")["resource_classes"]]
    assert "CUSTOM_CLI_HALF" not in classes
    assert cloud.get(f"/resource_providers/{storage}/inventories")["inventories"].keys() == {"DISK_GB"}


def test_inventory_set_below_usage_writes_and_warns(berth, cloud):
    storage = cloud.provider("cli-shrink-target", {"DISK_GB": {"total": 100}})
    cloud.allocate(new_uuid(), {storage: {"DISK_GB": 60}})
    shrunk = berth("inventory", "set", storage, "DISK_GB", "--total", "50", "-f", "json")
    assert as_json(shrunk)["inventories"]["DISK_GB"]["total"] == 50
    assert "warning: cli-shrink-target now has 50 DISK_GB to allocate but 60 are allocated" in shrunk.stderr
    assert "warning" not in berth("inventory", "set", storage, "DISK_GB", "--total", "60").stderr


def test_trait_list_of_a_provider_and_of_the_service(berth, cloud):
    assert rows(berth("trait", "list", "--provider", "cli-compute1-gpu0").stdout) == [["CUSTOM_CLI_FAST"]]
    dumped = as_json(berth("trait", "list", "--prefix", "CUSTOM_CLI", "-f", "json"))
    assert dumped == cloud.get("/traits?name=startswith:CUSTOM_CLI") == {"traits": ["CUSTOM_CLI_FAST"]}


def test_usage_of_a_provider_as_bars_against_capacity(berth, cloud):
    table = {row[0]: row[2:] for row in rows(berth("usage", "show", "cli-compute1").stdout)}
    assert table["VCPU"] == ["6", "64", "9%"] and table["MEMORY_MB"] == ["2048", "7680", "27%"]
    path = f"/resource_providers/{cloud.host}/usages"
    assert as_json(berth("usage", "show", cloud.host, "-f", "json")) == cloud.get(path)


def test_usage_of_a_project(berth, cloud):
    table = {(row[0], row[1]): row[2] for row in rows(berth("usage", "show", "--project", PROJECT).stdout)}
    assert table[("INSTANCE", "VCPU")] == "6" and table[("INSTANCE", "VGPU")] == "1"
    assert as_json(berth("usage", "show", "--project", PROJECT, "-f", "json")) == cloud.get(
        f"/usages?project_id={PROJECT}"
    )
    assert "give either a PROVIDER or --project" in berth("usage", "show", expect=2).stderr


def test_allocation_show_names_each_provider_and_amount(berth, cloud):
    table = rows(berth("allocation", "show", cloud.consumer).stdout)
    assert ["cli-compute1", cloud.host, "VCPU", "6"] in table
    assert ["cli-compute1-gpu0", cloud.gpu, "VGPU", "1"] in table
    assert ["project_id", PROJECT] in table
    dumped = as_json(berth("allocation", "show", cloud.consumer, "-f", "json"))
    assert dumped == cloud.get(f"/allocations/{cloud.consumer}")


# ---- candidates ----------------------------------------------------------------------------------


def test_candidates_take_the_apis_query_options_and_granular_groups(berth, cloud):
    args = ("--resources", "VCPU:2", "--resources1", "VGPU:1", "--required1", "CUSTOM_CLI_FAST", "--limit", "5")
    table = rows(berth("candidates", *args).stdout)
    assert ["1", "cli-compute1", cloud.host, "VCPU=2"] in table and ["cli-compute1-gpu0", "VGPU", "1", "4"] in table
    query = "resources=VCPU:2&resources1=VGPU:1&required1=CUSTOM_CLI_FAST&limit=5"
    assert as_json(berth("candidates", *args, "-f", "json")) == cloud.get(f"/allocation_candidates?{query}")
    raw = as_json(berth("candidates", "--query", query, "-f", "json"))
    assert raw == cloud.get(f"/allocation_candidates?{query}")


def test_candidates_explain_says_which_condition_leaves_nothing(berth, cloud):
    empty = berth("candidates", "--resources", "VCPU:100").stdout
    assert "no allocation candidates: add --explain" in empty
    explained = berth("candidates", "--resources", "VCPU:100", "--explain").stdout
    assert "nothing fits: no provider has 100 VCPU free" in explained
    report = as_json(berth("candidates", "--resources", "VCPU:100", "--explain", "-f", "json"))
    assert report == cloud.get("/berth/allocation_candidates/explain?resources=VCPU:100")
    assert report["candidates"] == 0


def _full_provider(cloud: Cloud, name: str) -> str:
    """A provider whose VCPU is all reserved: it has VCPU inventory, and none of it free."""
    return cloud.provider(name, {"VCPU": {"total": 3, "reserved": 3}})


def test_explain_blames_the_missing_room_not_the_tree_whose_provider_is_full(berth, cloud):
    full = _full_provider(cloud, "cli-full-tree")
    args = ("candidates", "--resources", "VCPU:1", "--in-tree", full, "--explain")
    explained = berth(*args).stdout
    assert "no provider is in the tree" not in explained
    assert "nothing fits: of the 1 provider the conditions above leave, none has 1 VCPU free" in explained
    report = as_json(berth(*args, "-f", "json"))
    steps = [(c["kind"], c["remaining"]) for c in report["groups"][0]["conditions"]]
    assert steps == [("tree", 1), ("inventory", 1), ("capacity", 0), ("units", 0)]
    # Other providers have room, and the count says so: the tree and the room together leave none.
    assert report["groups"][0]["conditions"][2]["alone"] > 0


def test_explain_blames_the_missing_room_not_the_aggregate_whose_member_is_full(berth, cloud):
    full = _full_provider(cloud, "cli-full-member")
    aggregate = new_uuid()
    generation = cloud.get(f"/resource_providers/{full}")["generation"]
    cloud.client.call(
        "PUT",
        f"/resource_providers/{full}/aggregates",
        {"aggregates": [aggregate], "resource_provider_generation": generation},
    )
    explained = berth("candidates", "--resources", "VCPU:1", "--member-of", aggregate, "--explain").stdout
    assert f"no provider is in aggregate {aggregate}" not in explained
    assert "nothing fits: of the 1 provider the conditions above leave, none has 1 VCPU free" in explained
    # An aggregate nobody is in is the cause by itself, and is named alone.
    explained = berth("candidates", "--resources", "VCPU:1", "--member-of", new_uuid(), "--explain").stdout
    assert "nothing fits: no provider is in aggregate (unknown aggregates)" in explained


# ---- leases --------------------------------------------------------------------------------------


def test_lease_list_and_release(berth, cloud):
    consumer = new_uuid()
    cloud.client.call("PUT", f"/berth/leases/{consumer}", {"expires_in": 600})
    cloud.allocate(consumer, {cloud.lonely: {"DISK_GB": 10}})
    assert [consumer] == [row[0] for row in rows(berth("lease", "list").stdout) if row[0] == consumer]
    assert consumer in [lease["consumer_uuid"] for lease in as_json(berth("lease", "list", "-f", "json"))["leases"]]
    assert f"released the lease and allocations of {consumer}" in berth("lease", "release", consumer).stdout
    assert cloud.get(f"/allocations/{consumer}")["allocations"] == {}
    assert consumer not in berth("lease", "list").stdout


def test_lease_release_of_a_consumer_without_a_lease_says_nothing_was_released(berth, cloud):
    consumer = new_uuid()
    cloud.allocate(consumer, {cloud.lonely: {"DISK_GB": 5}})
    for who in (consumer, new_uuid()):
        said = berth("lease", "release", who).stdout
        assert f"{who} had no lease; nothing released" in " ".join(said.split())
        assert "released the lease" not in said
        assert as_json(berth("lease", "release", who, "-f", "json")) == {"consumer_uuid": who, "released": None}
    # Its allocations stay, as the service keeps them.
    assert cloud.get(f"/allocations/{consumer}")["allocations"][cloud.lonely]["resources"] == {"DISK_GB": 5}


# ---- errors ------------------------------------------------------------------------------------------


def test_an_unknown_provider_is_named_with_what_to_do(berth):
    for reference in ("no-such-host", new_uuid()):
        result = berth("provider", "show", reference, expect=1)
        assert f"no resource provider named or with uuid '{reference}'" in result.stderr
        assert "berth provider list" in result.stderr


def test_a_bad_query_shows_placements_detail_code_and_a_hint(berth):
    result = berth("candidates", "--resources", "VCPU:lots", expect=1)
    assert "GET /allocation_candidates?resources=VCPU%3Alots answered 400 placement.undefined_code:" in result.stderr
    assert "Requested resource VCPU expected positive integer amount. Got: lots." in result.stderr
    assert "hint: check the command's arguments" in result.stderr
    assert "unexpected '--no-such'" in berth("candidates", "--no-such", "1", expect=2).stderr


def test_an_unreachable_url_is_named_with_berth_serve_as_the_remedy():
    url = f"http://127.0.0.1:{free_port()}"
    result = CliRunner().invoke(cli, ["provider", "list", "--url", url])
    assert result.exit_code == 1
    assert f"cannot reach Placement at {url}: connection refused" in result.stderr
    assert "berth serve" in result.stderr


def test_audit_of_an_unreachable_service_names_its_own_option():
    url = f"http://127.0.0.1:{free_port()}"
    result = CliRunner().invoke(cli, ["audit", "--placement", url])
    assert result.exit_code == 1
    assert f"cannot reach Placement at {url}: connection refused" in result.stderr
    assert "point --placement (or $BERTH_URL) at one" in result.stderr
    assert "--url" not in result.stderr


def test_a_url_that_is_not_placements_endpoint_says_so_once(live):
    url = live[0].url + "/placement"
    result = CliRunner().invoke(cli, ["provider", "list", "--url", url])
    assert result.exit_code == 1
    assert result.stderr.count("The resource could not be found.") == 1
    assert f"hint: the service at {url} has no such path: is --url" in result.stderr
    assert "berth provider list" not in result.stderr


def test_a_url_without_its_scheme_is_a_usage_error_that_says_so():
    result = CliRunner().invoke(cli, ["provider", "list", "--url", "127.0.0.1:8778"])
    assert result.exit_code == 2
    assert "needs its scheme: http://127.0.0.1:8778" in result.stderr
    assert "Is the service running?" not in result.stderr


def test_allocation_show_refuses_what_is_not_a_uuid(berth):
    result = berth("allocation", "show", "not-a-uuid", expect=2)
    assert "'not-a-uuid' is not a uuid" in result.stderr
    assert "holds no allocations" not in result.output


def test_inventory_amounts_beyond_the_apis_range_are_refused_by_the_command_line(berth, cloud):
    result = berth("inventory", "set", "cli-storage", "DISK_GB", "--total", "99999999999", expect=2)
    assert "Invalid value for '--total': 99999999999 is not in the range 1<=x<=2147483647" in result.stderr
    assert "schema" not in result.stderr


def test_a_schema_refusal_says_its_sentence_without_the_schema(berth, cloud):
    result = berth("inventory", "set", "cli-storage", "DISK_GB", "--allocation-ratio", "1e39", expect=1)
    assert "JSON does not validate: 1e+39 is greater than the maximum of 3.40282e+38\n" in result.stderr
    assert "Failed validating" not in result.stderr and "schema[" not in result.stderr


def test_berth_version_prints_the_installed_version(capsys):
    from importlib.metadata import version

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"berth {version('berth')}\n"


def test_main_returns_the_exit_status_of_usage_errors(capsys):
    assert main(["provider", "show"]) == 2
    assert "Missing argument 'PROVIDER'" in capsys.readouterr().err


# ---- Keystone ----------------------------------------------------------------------------------------


def test_with_os_auth_url_a_keystoneauth_session_gives_the_token_and_the_endpoint(monkeypatch):
    """keystoneauth1 stands in as a fake: the password plugin's options come from the OS_* variables."""
    import sys
    import types

    from berth.cli.client import connection

    seen = {}

    class Option:
        def __init__(self, dest):
            self.dest = dest

    class Loader:
        def get_options(self):
            return [Option(name) for name in ("auth_url", "username", "password", "project_name")]

        def load_from_options(self, **options):
            seen["options"] = options
            return "auth-plugin"

    class Session:
        def __init__(self, auth):
            seen["auth"] = auth

        def get_token(self):
            return "keystone-token"

        def get_endpoint(self, **where):
            seen["endpoint"] = where
            return "http://placement.example:8778"

    package = types.ModuleType("keystoneauth1")
    package.loading = types.SimpleNamespace(get_plugin_loader=lambda name: seen.setdefault("plugin", name) and Loader())
    package.session = types.SimpleNamespace(Session=Session)
    package.exceptions = types.SimpleNamespace(ClientException=RuntimeError)
    monkeypatch.setitem(sys.modules, "keystoneauth1", package)
    environ = {"OS_AUTH_URL": "http://keystone.example/v3", "OS_USERNAME": "ops", "OS_PASSWORD": "pw"}
    client = connection.connect(None, None, environ)
    assert (client.url, client.headers["X-Auth-Token"]) == ("http://placement.example:8778", "keystone-token")
    assert seen["plugin"] == "password" and seen["auth"] == "auth-plugin"
    assert seen["options"] == {"auth_url": "http://keystone.example/v3", "username": "ops", "password": "pw"}
    assert seen["endpoint"]["service_type"] == "placement" and seen["endpoint"]["interface"] == "public"
    # A URL or token given wins: the token skips Keystone altogether, the URL skips the catalog.
    assert connection.connect("http://other:1", None, environ).url == "http://other:1"
    assert connection.connect(None, "mine", environ).headers["X-Auth-Token"] == "mine"


def test_without_keystoneauth1_the_os_variables_fall_back_to_the_development_token(monkeypatch, capsys):
    import sys

    from berth.cli.client import connection

    monkeypatch.setitem(sys.modules, "keystoneauth1", None)
    client = connection.connect(None, None, {"OS_AUTH_URL": "http://keystone.example/v3"})
    assert (client.url, client.headers["X-Auth-Token"]) == ("http://127.0.0.1:8778", "admin")
    assert "pip install 'berth[keystone]'" in capsys.readouterr().err


# ---- quotas --------------------------------------------------------------------------------------


def test_quota_set_show_list_and_delete(berth, cloud):
    project = f"cli-quota-{new_uuid()[:8]}"
    shown = as_json(berth("quota", "set", PROJECT, "--limit", "VCPU=64", "--limit", "consumers=10", "-f", "json"))
    assert shown["limits"] == {"VCPU": 64, "consumers": 10}
    assert shown == cloud.get(f"/berth/quotas/{PROJECT}")
    table = {row[0]: row[2:] for row in rows(berth("quota", "show", PROJECT).stdout)}
    used = shown["usage"]["VCPU"]
    assert table["VCPU"] == [str(used), "64", f"{100 * used / 64:.0f}%"]
    assert table["MEMORY_MB"][1] == "none"
    berth("quota", "set", project, "--limit", "MEMORY_MB=1024", "--user", "bob")
    user = yaml.safe_load(berth("quota", "show", project, "--user", "bob", "-f", "yaml").stdout)
    assert user == {
        "project_id": project,
        "user_id": "bob",
        "limits": {"MEMORY_MB": 1024},
        "usage": {"MEMORY_MB": 0, "consumers": 0},
    }
    listed = {(row[0], row[1]) for row in rows(berth("quota", "list").stdout)}
    assert {(PROJECT, "VCPU"), (PROJECT, "consumers")} <= listed
    assert as_json(berth("quota", "list", "-f", "json")) == cloud.get("/berth/quotas")
    assert "removed the limits of user bob of project" in berth("quota", "delete", project, "--user", "bob").stdout
    assert "removed the limits of project" in berth("quota", "delete", PROJECT).stdout
    assert PROJECT not in [quota["project_id"] for quota in cloud.get("/berth/quotas")["quotas"]]


@pytest.mark.parametrize(
    ("args", "says", "status"),
    [
        (("set", PROJECT, "--limit", "VCPU"), "give CLASS=N with N a whole number", 2),
        (("set", PROJECT, "--limit", "VCPU=-1"), "give CLASS=N with N a whole number", 2),
        (("set", PROJECT), "Missing option '--limit'", 2),
        (("set", PROJECT, "--limit", "CUSTOM_NOPE=1"), "berth.quota.unknown_resource", 1),
        (("delete", "cli-no-quota"), "project cli-no-quota has no limits to delete", 1),
        (("set", "", "--limit", "VCPU=4"), "give a project or user id, not an empty one", 2),
        (("show", " "), "give a project or user id, not an empty one", 2),
        (("set", PROJECT, "--user", "", "--limit", "VCPU=4"), "give a project or user id, not an empty one", 2),
        (("set", PROJECT, "--limit", f"VCPU={2**64}"), f"at most {2**63 - 1}", 2),
        (("set", PROJECT, "--limit", "VCPU=1", "--limit", "VCPU=2"), "VCPU is given twice", 2),
    ],
    ids=[
        "no amount",
        "negative",
        "no limit",
        "unknown class",
        "nothing to delete",
        "no project",
        "blank",
        "no user",
        "too large",
        "twice",
    ],
)
def test_quota_mistakes_say_what_to_do(berth, args, says, status):
    result = berth("quota", *args, expect=status)
    assert says in result.stderr
    if status == 1:
        assert "hint: " in result.stderr
