"""The dashboard's page, assets and JSON, through the WSGI application on both databases."""

import pytest
import yaml
from apihelpers import Api, new_uuid

from berth.api.app import PlacementApp, Settings
from berth.api.dashboard import PUBLIC_PATHS
from berth.domain.capacity import capacity


@pytest.fixture
def cloud(api):
    """Two hosts (one with a NUMA child and over-commit), one idle host, three consumers in two projects."""
    host_a = api.create_provider(
        "host-a", inventory={"VCPU": {"total": 10, "reserved": 1, "allocation_ratio": 1.5}, "MEMORY_MB": 8192}
    )
    numa = api.create_provider("host-a-numa0", parent=host_a, inventory={"PCPU": 4})
    host_b = api.create_provider("host-b", inventory={"VCPU": 4, "MEMORY_MB": 2048})
    idle = api.create_provider("idle-host", inventory={"VCPU": 64})
    big, small, other = new_uuid(), new_uuid(), new_uuid()
    api.allocate(big, {host_a: {"VCPU": 2, "MEMORY_MB": 6144}, numa: {"PCPU": 1}}, project="tenant-a")
    api.allocate(small, {host_b: {"VCPU": 1, "MEMORY_MB": 256}}, project="tenant-a")
    api.allocate(other, {host_b: {"VCPU": 3}}, project="tenant-b")
    return {"host_a": host_a, "numa": numa, "host_b": host_b, "idle": idle, "big": big, "small": small, "other": other}


def _expected_totals(api, providers):
    totals = {}
    for uuid in providers:
        inventories = api.get(f"/resource_providers/{uuid}/inventories").json_body["inventories"]
        used = api.get(f"/resource_providers/{uuid}/usages").json_body["usages"]
        for rc, inv in inventories.items():
            t = totals.setdefault(rc, {"capacity": 0, "used": 0})
            t["capacity"] += capacity(inv["total"], inv["reserved"], inv["allocation_ratio"])
            t["used"] += used[rc]
    return totals


def test_summary_totals_equal_the_usages_api(api, cloud):
    summary = api.get("/berth/dashboard/summary").json_body
    expected = _expected_totals(api, [cloud[k] for k in ("host_a", "numa", "host_b", "idle")])
    got = {c["resource_class"]: c for c in summary["resource_classes"]}
    assert {rc: {"capacity": c["capacity"], "used": c["used"]} for rc, c in got.items()} == expected
    # (10 - 1) x 1.5 rounds down to 13, added to 4 and 64.
    assert got["VCPU"]["capacity"] == 13 + 4 + 64 and got["VCPU"]["free"] == 81 - 6
    assert (summary["providers"], summary["roots"], summary["consumers"]) == (4, 3, 3)


def test_summary_ranks_by_dominant_share(api, cloud):
    summary = api.get("/berth/dashboard/summary").json_body
    # host-b is full of VCPU (4 of 4); host-a's fullest class is memory (6144 of 8192).
    fullest = [(p["name"], p["resource_class"], p["used"], p["capacity"]) for p in summary["fullest_providers"]]
    assert fullest[:2] == [("host-b", "VCPU", 4, 4), ("host-a", "MEMORY_MB", 6144, 8192)]
    assert fullest[-1][0] == "idle-host"
    # The big consumer holds 6144 of 10240 MB (60 %), more than any share of VCPU or PCPU.
    first = summary["biggest_consumers"][0]
    assert (first["id"], first["project_id"], first["resource_class"], first["used"]) == (
        cloud["big"],
        "tenant-a",
        "MEMORY_MB",
        6144,
    )
    assert first["share"] == pytest.approx(6144 / 10240)
    projects = {p["id"]: (p["resource_class"], p["used"]) for p in summary["biggest_projects"]}
    assert projects == {"tenant-a": ("MEMORY_MB", 6400), "tenant-b": ("VCPU", 3)}
    assert [p["id"] for p in summary["biggest_projects"]] == ["tenant-a", "tenant-b"]


def test_totals_and_rankings_are_the_summarys_two_halves(api, cloud):
    summary = api.get("/berth/dashboard/summary").json_body
    totals = api.get("/berth/dashboard/totals").json_body
    rankings = api.get("/berth/dashboard/rankings").json_body
    assert totals == {k: summary[k] for k in ("providers", "roots", "consumers", "over_capacity", "resource_classes")}
    assert rankings == {k: summary[k] for k in ("fullest_providers", "biggest_consumers", "biggest_projects")}
    assert totals["resource_classes"] and rankings["biggest_consumers"]


def test_summary_of_an_empty_cloud(api):
    summary = api.get("/berth/dashboard/summary").json_body
    assert summary["resource_classes"] == [] and summary["providers"] == 0 and summary["biggest_consumers"] == []


def test_provider_page_nests_trees_with_their_usage(api, cloud):
    page = api.get("/berth/dashboard/providers").json_body
    assert [t["name"] for t in page["trees"]] == ["host-a", "host-b", "idle-host"]
    assert (page["matched"], page["pages"]) == (3, 1)
    host_a = page["trees"][0]
    assert [c["uuid"] for c in host_a["children"]] == [cloud["numa"]]
    usages = api.get(f"/resource_providers/{cloud['host_a']}/usages").json_body["usages"]
    assert {i["resource_class"]: i["used"] for i in host_a["inventories"]} == usages
    vcpu = next(i for i in host_a["inventories"] if i["resource_class"] == "VCPU")
    assert (vcpu["capacity"], vcpu["used"], vcpu["free"]) == (13, 2, 11)
    assert host_a["children"][0]["inventories"][0]["used"] == 1


def test_provider_pages_never_hold_more_than_their_size(api, cloud):
    for i in range(5):
        api.create_provider(f"zz-{i}")
    first = api.get("/berth/dashboard/providers?page_size=3").json_body
    assert (first["matched"], first["pages"], len(first["trees"])) == (8, 3, 3)
    last = api.get("/berth/dashboard/providers?page_size=3&page=3").json_body
    assert [t["name"] for t in last["trees"]] == ["zz-3", "zz-4"]
    beyond = api.get("/berth/dashboard/providers?page_size=3&page=9").json_body
    assert beyond["trees"] == [] and beyond["matched"] == 8


def test_search_by_name_or_uuid_finds_the_whole_tree(api, cloud):
    by_child = api.get("/berth/dashboard/providers?q=NUMA0").json_body
    assert [t["uuid"] for t in by_child["trees"]] == [cloud["host_a"]] and by_child["matched"] == 1
    by_uuid = api.get(f"/berth/dashboard/providers?q={cloud['host_b'][:13].upper()}").json_body
    assert [t["uuid"] for t in by_uuid["trees"]] == [cloud["host_b"]]
    # LIKE's wildcards are plain characters in a search.
    assert api.get("/berth/dashboard/providers?q=%25").json_body["matched"] == 0
    assert api.get("/berth/dashboard/providers?q=host_").json_body["matched"] == 0


@pytest.mark.parametrize("query", ["page=0", "page=x", "page_size=0", "page_size=1000", "other=1"])
def test_bad_page_queries_are_400(api, query):
    assert api.get(f"/berth/dashboard/providers?{query}").status_code == 400


def test_page_assets_and_config_need_no_token(api):
    page = api.get("/dashboard", token="", version="")
    assert page.status_code == 200 and page.mimetype == "text/html"
    assert b'<base href="/">' in page.data and b"dashboard/static/main.js" in page.data
    for path in sorted(p for p in PUBLIC_PATHS if p.startswith("/dashboard/static/")):
        assert api.get(path, token="", version="").status_code == 200, path
    assert {p.rsplit("/", 1)[-1] for p in PUBLIC_PATHS if "/static/" in p} >= {"main.js", "dashboard.css"}
    assert api.get("/dashboard/static/nothing.js", token="").status_code == 401
    assert api.get("/dashboard/static/nothing.js").status_code == 404
    config = api.get("/dashboard/config.json", token="", version="").json_body
    assert config["auth_strategy"] == "noauth2" and not config["token_required"]
    assert config["development_token"] == "admin"


def test_the_page_learns_the_conductors_url_only_when_one_is_set(api, db):
    assert api.get("/dashboard/config.json", token="").json_body["conductor_url"] is None
    settings = Settings(dashboard_conductor="http://conductor.example:8774/")
    config = Api(PlacementApp(db, settings)).get("/dashboard/config.json", token="").json_body
    assert config["conductor_url"] == "http://conductor.example:8774"


def test_the_wsgi_entry_point_reads_the_conductors_url_from_the_environment(monkeypatch):
    from berth.api.wsgi import settings_from_environment

    monkeypatch.delenv("BERTH_DASHBOARD_CONDUCTOR", raising=False)
    assert settings_from_environment().dashboard_conductor is None
    monkeypatch.setenv("BERTH_DASHBOARD_CONDUCTOR", "http://conductor.example:8774")
    assert settings_from_environment().dashboard_conductor == "http://conductor.example:8774"


def test_page_is_written_under_the_mount_path(app):
    from werkzeug.test import Client

    response = Client(app).get("/dashboard", environ_overrides={"SCRIPT_NAME": "/placement"})
    assert b'<base href="/placement/">' in response.data


def test_figures_need_a_token_and_an_admin_by_default(api):
    for path in (
        "/berth/dashboard/summary",
        "/berth/dashboard/providers",
        "/berth/dashboard/totals",
        "/berth/dashboard/rankings",
    ):
        assert api.get(path, token="").status_code == 401
        assert api.get(path, token="alice:tenant-a").status_code == 403
        assert api.get(path, token="nova:service", headers={"X-Roles": "service"}).status_code == 403
        assert api.get(path).status_code == 200


def test_a_policy_file_opens_the_figures_to_readers(db, tmp_path):
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(
        yaml.safe_dump({"tokens": {"t-reader": {"user_id": "a", "project_id": "p", "roles": ["reader"]}}})
    )
    policy = tmp_path / "policy.yaml"
    policy.write_text('"berth:dashboard": "role:reader"\n')
    api = Api(PlacementApp(db, Settings(auth_strategy="tokens", tokens_file=str(tokens), policy_file=str(policy))))
    assert api.get("/berth/dashboard/summary", token="t-reader").status_code == 200
    assert api.get("/resource_providers", token="t-reader").status_code == 403
    config = api.get("/dashboard/config.json", token="").json_body
    assert config["token_required"] and config["development_token"] is None


@pytest.fixture
def gpu_cloud(api):
    """Hosts whose GPU child is full, one whose CPUs are full too, one idle, and one shrunk below its use."""
    hosts = {}
    for i in range(4):
        host = api.create_provider(f"gpu-host-{i}", inventory={"VCPU": 10})
        gpu = api.create_provider(f"gpu-host-{i}-pci0", parent=host, inventory={"VGPU": 2})
        api.allocate(new_uuid(), {gpu: {"VGPU": 2}, host: {"VCPU": 1}})
        hosts[f"gpu-host-{i}"] = (host, gpu)
    hot = hosts["gpu-host-3"][0]
    api.allocate(new_uuid(), {hot: {"VCPU": 9}})
    for i in range(8):
        api.create_provider(f"idle-{i}", inventory={"VCPU": 10})
    shrunk = api.create_provider("shrunk-host", inventory={"VCPU": 8})
    api.allocate(new_uuid(), {shrunk: {"VCPU": 8}})
    api.set_inventory(shrunk, {"VCPU": 4})
    return {"hosts": hosts, "hot": hot, "shrunk": shrunk}


def test_fullest_ranks_hosts_each_once_with_their_fullest_child(api, gpu_cloud):
    fullest = api.get("/berth/dashboard/rankings").json_body["fullest_providers"]
    roots = {
        p["uuid"]
        for p in api.get("/resource_providers").json_body["resource_providers"]
        if not p["parent_provider_uuid"]
    }
    assert all(entry["id"] in roots for entry in fullest)
    assert len({entry["id"] for entry in fullest}) == len(fullest) == 10
    # Over capacity first (8 of 4), then the host full on both GPU and CPU, then the GPU-only ones.
    assert [entry["name"] for entry in fullest[:5]] == [
        "shrunk-host",
        "gpu-host-3",
        "gpu-host-0",
        "gpu-host-1",
        "gpu-host-2",
    ]
    assert (fullest[0]["used"], fullest[0]["capacity"], fullest[0]["share"]) == (8, 4, 2.0)
    assert fullest[0]["provider"] == {"id": gpu_cloud["shrunk"], "name": "shrunk-host"}
    host, gpu = gpu_cloud["hosts"]["gpu-host-0"]
    assert fullest[2]["id"] == host and fullest[2]["provider"] == {"id": gpu, "name": "gpu-host-0-pci0"}
    assert (fullest[2]["resource_class"], fullest[2]["used"], fullest[2]["capacity"]) == ("VGPU", 2, 2)


def test_totals_count_the_providers_over_capacity(api, gpu_cloud):
    totals = api.get("/berth/dashboard/totals").json_body
    assert totals["over_capacity"] == 1
    assert api.get("/berth/dashboard/summary").json_body["over_capacity"] == 1
    # Used back within capacity: counted no more.
    api.set_inventory(gpu_cloud["shrunk"], {"VCPU": 8})
    assert api.get("/berth/dashboard/totals").json_body["over_capacity"] == 0


def test_provider_page_sorts_fullest_first_and_filters_by_fill(api, gpu_cloud):
    by_usage = api.get("/berth/dashboard/providers?sort=usage&page_size=5").json_body
    assert [t["name"] for t in by_usage["trees"]] == [
        "shrunk-host",
        "gpu-host-3",
        "gpu-host-0",
        "gpu-host-1",
        "gpu-host-2",
    ]
    assert by_usage["matched"] == 13 and by_usage["sort"] == "usage"
    second = api.get("/berth/dashboard/providers?sort=usage&page_size=5&page=2").json_body
    assert all(t["name"].startswith("idle-") for t in second["trees"])
    # Children stay within their host.
    assert by_usage["trees"][2]["children"][0]["name"] == "gpu-host-0-pci0"
    hot = api.get("/berth/dashboard/providers?above=90").json_body
    assert [t["name"] for t in hot["trees"]] == ["gpu-host-0", "gpu-host-1", "gpu-host-2", "gpu-host-3", "shrunk-host"]
    assert (hot["matched"], hot["above"]) == (5, 90)
    over = api.get("/berth/dashboard/providers?above=100&sort=usage").json_body
    assert [t["uuid"] for t in over["trees"]] == [gpu_cloud["shrunk"]] and over["matched"] == 1
    searched = api.get("/berth/dashboard/providers?above=90&q=gpu-host-1").json_body
    assert [t["name"] for t in searched["trees"]] == ["gpu-host-1"]


@pytest.mark.parametrize("query", ["sort=fill", "above=-1", "above=x", "above=10000"])
def test_bad_sorts_and_filters_are_400(api, query):
    response = api.get(f"/berth/dashboard/providers?{query}")
    assert response.status_code == 400
    assert response.json_body["errors"][0]["status"] == 400


def test_biggest_consumers_group_consumers_alike(api):
    host = api.create_provider("host", inventory={"VCPU": 100, "MEMORY_MB": 100000})
    alike = [new_uuid() for _ in range(12)]
    for consumer in alike:
        api.allocate(consumer, {host: {"VCPU": 4, "MEMORY_MB": 2048}}, project="tenant-a")
    other = new_uuid()
    api.allocate(other, {host: {"VCPU": 4, "MEMORY_MB": 2048}}, project="tenant-b")
    small = new_uuid()
    api.allocate(small, {host: {"VCPU": 1}}, project="tenant-a")
    consumers = api.get("/berth/dashboard/rankings").json_body["biggest_consumers"]
    rows = [(c["project_id"], c["resource_class"], c["used"], c["consumers"]) for c in consumers]
    assert rows == [("tenant-a", "VCPU", 4, 12), ("tenant-b", "VCPU", 4, 1), ("tenant-a", "VCPU", 1, 1)]
    assert consumers[0]["id"] == min(alike) and consumers[2]["id"] == small
