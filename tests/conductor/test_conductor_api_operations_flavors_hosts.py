"""The conductors' API through its WSGI application over a real database and service: the operations
a project's readers see (their project's servers', not another's), the kinds an operation list
takes, flavors whose id or name another flavor holds, one extra spec read and set as Nova's API
does, hosts disabled and enabled answered as ``GET /hosts/{name}`` shows them, and a host's name
refused to a second agent while the agent that holds it beats."""

from __future__ import annotations

import re
import uuid

import pytest
import sqlalchemy as sa
from conductorhelpers import PLAIN, ended
from werkzeug.test import Client

from berth.conductor.api.app import create_app
from berth.conductor.api.handlers.operations import KINDS
from berth.conductor.conductor import _RESUMERS
from berth.conductor.control.plane import ControlPlane, Who
from berth.conductor.journal import metadata as journal_metadata
from berth.conductor.records import tables
from berth.scheduler.settings import SelectionSettings

ADMIN = {"X-Auth-Token": "admin"}
# Members (and a reader) of two projects other than the admin's.
MEMBER = {"X-Auth-Token": "u:p", "X-Roles": "member"}
READER = {"X-Auth-Token": "r:p", "X-Roles": "reader"}
OTHER = {"X-Auth-Token": "v:q", "X-Roles": "member"}
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


@pytest.fixture(scope="module")
def plane(placement_service, cloud, tmp_path_factory):
    from berth.clients.placement import PlacementClient

    made = ControlPlane(
        f"sqlite:///{tmp_path_factory.mktemp('api') / 'conductor.sqlite'}",
        PlacementClient(placement_service.url),
        selection=SelectionSettings(enabled_filters=[]),
    )
    for name, agent in sorted(cloud.items()):
        made.register_host(name, agent.url, "zone-1", agent.token, "agent", admin=False)
    made.flavors.create({"name": PLAIN.name, "vcpus": 1, "ram": 512, "disk": 1})
    yield made
    made.close()


@pytest.fixture(scope="module")
def web(plane):
    return Client(create_app(plane))


def _built(plane, who: Who, name: str) -> str:
    [build] = plane.create_servers(who, name=name, flavor_ref=PLAIN.name)
    assert ended(plane, build.id).state == "done"
    return build.instance_uuid


@pytest.fixture(scope="module")
def servers(plane):
    """A server of project p, one of project p deleted since, and one of project q."""
    ours = _built(plane, Who("p", "u"), "ours")
    gone = _built(plane, Who("p", "u"), "gone")
    assert ended(plane, plane.delete(gone).id).state == "done"
    theirs = _built(plane, Who("q", "v"), "theirs")
    yield {"ours": ours, "gone": gone, "theirs": theirs}
    for server in (ours, theirs):
        ended(plane, plane.delete(server).id)


def _error(answer, status: int) -> dict:
    assert answer.status_code == status, answer.get_data(as_text=True)
    [error] = answer.get_json()["errors"]
    return error


def _snapshot(plane) -> dict[str, object]:
    with plane.journal.engine.connect() as conn:
        return {
            t.name: sorted(map(tuple, conn.execute(sa.select(t)).all()), key=repr)
            for t in [*tables.metadata.sorted_tables, *journal_metadata.sorted_tables]
        }


def _listed(web, path: str, headers) -> list[tuple[str, str]]:
    answer = web.get(path, headers=headers)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return [(op["server_id"], op["kind"]) for op in answer.get_json()["operations"]]


def test_a_projects_readers_list_the_operations_of_its_servers_only(web, servers):
    ours, gone, theirs = servers["ours"], servers["gone"], servers["theirs"]
    mine = _listed(web, "/operations", MEMBER)
    # Newest first: the deleted server's delete, then the builds (a deleted server's stay listed).
    assert mine == [(gone, "delete"), (gone, "build"), (ours, "build")]
    assert _listed(web, "/operations", READER) == mine
    assert _listed(web, "/operations?project_id=p", MEMBER) == mine
    assert _listed(web, "/operations", OTHER) == [(theirs, "build")]
    assert _listed(web, "/operations?kind=build", MEMBER) == [(gone, "build"), (ours, "build")]
    assert _listed(web, "/operations?kind=delete&state=done", MEMBER) == [(gone, "delete")]
    # The admin sees every project's, asked for all or for one.
    everyone = _listed(web, "/operations", ADMIN)
    assert set(mine) | {(theirs, "build")} <= set(everyone)
    assert _listed(web, "/operations?all_projects=1", ADMIN) == everyone
    assert _listed(web, "/operations?project_id=p", ADMIN) == mine
    # Every project's, or another's, is the admin's.
    for path in ("/operations?all_projects=1", "/operations?project_id=q", "/operations?all_tenants=true"):
        assert "berth:operations:index:all_projects" in _error(web.get(path, headers=MEMBER), 403)["detail"], path
    # One server's: a deleted one's too; another project's is not found.
    assert _listed(web, f"/operations?server_id={gone}", MEMBER) == [(gone, "delete"), (gone, "build")]
    assert _error(web.get(f"/operations?server_id={theirs}", headers=MEMBER), 404)["code"] == "berth.server.not_found"


def test_a_members_operations_come_a_page_at_a_time_and_no_other_projects_marker(web, servers):
    mine = [op["id"] for op in web.get("/operations", headers=MEMBER).get_json()["operations"]]
    first = web.get("/operations?limit=2", headers=MEMBER).get_json()
    assert [op["id"] for op in first["operations"]] == mine[:2]
    [link] = first["operations_links"]
    href = link["href"].split("localhost", 1)[1]
    assert [op["id"] for op in web.get(href, headers=MEMBER).get_json()["operations"]] == mine[2:]
    [theirs] = [op["id"] for op in web.get("/operations", headers=OTHER).get_json()["operations"]]
    refused = _error(web.get(f"/operations?marker={theirs}", headers=MEMBER), 400)
    assert refused["code"] == "berth.marker.not_found"
    assert web.get(f"/operations?marker={theirs}", headers=ADMIN).status_code == 200


def test_an_unknown_kind_is_refused_as_an_unknown_state_is_naming_the_kinds(web, servers):
    kind = _error(web.get("/operations?kind=bogus", headers=ADMIN), 400)
    state = _error(web.get("/operations?state=bogus", headers=ADMIN), 400)
    assert kind["code"] == state["code"]
    assert "'bogus'" in kind["detail"] and all(k in kind["detail"] for k in ("build", "live_migrate", "clean_up_moved"))
    assert _error(web.get("/operations?kind=bogus", headers=MEMBER), 400)["code"] == state["code"]
    # The kinds named are every kind the journal holds: those a conductor resumes.
    assert set(KINDS) == set(_RESUMERS)
    for kind_name in ("build", "delete", "clean_up_deleted", "preempted_offload"):
        assert web.get(f"/operations?kind={kind_name}", headers=ADMIN).status_code == 200


def test_a_flavor_may_take_no_other_flavors_id_or_name(plane, web):
    plane.flavors.create({"name": "named", "vcpus": 1, "ram": 64, "id": "flavor-7"})
    before = _snapshot(plane)
    for asked, clash in [
        # An id that is another flavor's name, and a name that is another flavor's id.
        ({"name": "f8", "id": "named"}, "A flavor named 'named' exists already"),
        ({"name": "flavor-7"}, "A flavor with the id 'flavor-7' exists already"),
        # The same id, the same name (with an id given, and without: no generated id in the message).
        ({"name": "other", "id": "flavor-7"}, "A flavor with the id 'flavor-7' exists already"),
        ({"name": "named", "id": "fresh"}, "A flavor named 'named' exists already"),
        ({"name": "named"}, "A flavor named 'named' exists already"),
    ]:
        body = {"flavor": {"vcpus": 1, "ram": 64, **asked}}
        error = _error(web.post("/flavors", json=body, headers=ADMIN), 409)
        assert error["code"] == "berth.flavor.duplicate" and clash in error["detail"], (asked, error)
        assert not re.search(UUID, error["detail"]), error  # no id made up for the new flavor
    assert _snapshot(plane) == before
    assert web.get("/flavors/named", headers=ADMIN).get_json()["flavor"]["id"] == "flavor-7"
    # A flavor whose id is its own name is one flavor, not a clash.
    made = web.post("/flavors", json={"flavor": {"name": "same", "id": "same", "vcpus": 1, "ram": 64}}, headers=ADMIN)
    assert made.status_code == 200, made.get_data(as_text=True)
    for flavor in ("flavor-7", "same"):
        assert web.delete(f"/flavors/{flavor}", headers=ADMIN).status_code == 202


def test_one_extra_spec_is_shown_set_and_unset_as_novas(plane, web):
    plane.flavors.create({"name": "specced", "vcpus": 1, "ram": 64, "extra_specs": {"hw:cpu_policy": "shared"}})
    path = "/flavors/specced/os-extra_specs"
    assert web.get(f"{path}/hw:cpu_policy", headers=MEMBER).get_json() == {"hw:cpu_policy": "shared"}
    answer = web.put(f"{path}/hw:cpu_policy", json={"hw:cpu_policy": "dedicated"}, headers=ADMIN)
    assert answer.status_code == 200 and answer.get_json() == {"hw:cpu_policy": "dedicated"}
    added = web.put(f"{path}/trait:CUSTOM_FAST", json={"trait:CUSTOM_FAST": "required"}, headers=ADMIN)
    assert added.get_json() == {"trait:CUSTOM_FAST": "required"}
    assert web.get(path, headers=ADMIN).get_json()["extra_specs"] == {
        "hw:cpu_policy": "dedicated",
        "trait:CUSTOM_FAST": "required",
    }
    before = _snapshot(plane)
    for body, headers, status in [
        ({"hw:mem_page_size": "large"}, ADMIN, 400),  # the body's key is not the path's
        ({"hw:cpu_policy": "shared", "hw:mem_page_size": "large"}, ADMIN, 400),
        ({}, ADMIN, 400),
        ({"hw:cpu_policy": 2}, ADMIN, 400),
        ({"hw:cpu_policy": "sometimes"}, ADMIN, 400),  # no request spec
        ({"hw:cpu_policy": "shared"}, MEMBER, 403),
    ]:
        assert web.put(f"{path}/hw:cpu_policy", json=body, headers=headers).status_code == status, body
    assert _snapshot(plane) == before
    for method in ("GET", "DELETE"):
        error = _error(web.open(f"{path}/nope", method=method, headers=ADMIN), 404)
        assert error["code"] == "berth.flavor.extra_spec_not_found", error
        assert "Flavor 'specced' has no extra spec 'nope'." in error["detail"], error
    assert _snapshot(plane) == before
    assert _error(web.get("/flavors/nowhere/os-extra_specs/x", headers=ADMIN), 404)["code"] == "berth.flavor.not_found"
    assert web.delete(f"{path}/trait:CUSTOM_FAST", headers=ADMIN).status_code == 200
    assert web.get(path, headers=ADMIN).get_json()["extra_specs"] == {"hw:cpu_policy": "dedicated"}
    document = web.get("/berth/openapi.json").get_json()["paths"]["/flavors/{flavor_id}/os-extra_specs/{key}"]
    assert set(document) == {"get", "put", "delete"} and document["put"]["requestBody"]
    assert web.delete("/flavors/specced", headers=ADMIN).status_code == 202


def _without_heartbeat(host: dict) -> dict:
    return {k: v for k, v in host.items() if k != "last_heartbeat_seconds_ago"}


def test_a_host_disabled_or_enabled_is_answered_with_its_servers(plane, web, servers):
    host = plane.servers.get(servers["ours"])["host"]
    count = web.get(f"/hosts/{host}", headers=ADMIN).get_json()["host"]["servers"]
    assert count >= 1
    try:
        disabled = web.post(f"/hosts/{host}/disable", json={"reason": "disk swap"}, headers=ADMIN).get_json()["host"]
        assert (disabled["status"], disabled["servers"]) == ("disabled", count)
        assert _without_heartbeat(disabled) == _without_heartbeat(
            web.get(f"/hosts/{host}", headers=ADMIN).get_json()["host"]
        )
    finally:
        enabled = web.post(f"/hosts/{host}/enable", headers=ADMIN).get_json()["host"]
    assert (enabled["status"], enabled["servers"]) == ("enabled", count)
    assert _without_heartbeat(enabled) == _without_heartbeat(
        web.get(f"/hosts/{host}", headers=ADMIN).get_json()["host"]
    )


def test_a_second_agent_is_refused_a_host_name_the_first_holds_and_the_first_is_taken_anywhere(plane, web):
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    path = f"/hosts/named-{first[:8]}"

    def registered(url: str, agent_id: str, query: str = ""):
        body = {"host": {"url": url, "zone": "zone-1", "agent_id": agent_id}}
        return web.put(path + query, json=body, headers=ADMIN)

    try:
        before = _snapshot(plane)
        # Checked, not made: as an agent asks before it serves.
        assert registered("http://127.0.0.1:9", first, "?dry_run=1").status_code == 204
        assert _snapshot(plane) == before
        assert registered("http://127.0.0.1:9", first).status_code == 200
        before = _snapshot(plane)
        for query in ("", "?dry_run=1"):
            error = _error(registered("http://127.0.0.1:10", second, query), 409)
            assert error["code"] == "berth.host.name_taken", error
            assert "held by the agent at http://127.0.0.1:9, whose" in error["detail"], error
        assert _error(registered("http://127.0.0.1:10", second.upper()), 400)["code"] == "berth.undefined_code"
        assert _snapshot(plane) == before
        restarted = registered("http://127.0.0.1:11", first)
        assert restarted.status_code == 200 and restarted.get_json()["host"]["url"] == "http://127.0.0.1:11"
    finally:
        web.delete(path, headers=ADMIN)
