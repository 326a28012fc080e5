"""Bad input to every endpoint of the conductors' API: a 4xx with Placement's error body and a
code, and nothing written (every table of the conductors' database, the journal's included, as it
was). Through the real WSGI application over a real database and service."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
import sqlalchemy as sa
from conductorhelpers import PLAIN
from werkzeug.test import Client

from berth.conductor.api.app import create_app
from berth.conductor.control.plane import ControlPlane, Who
from berth.conductor.journal import metadata as journal_metadata
from berth.conductor.records import server_states, tables
from berth.scheduler.settings import SelectionSettings

ADMIN = {"X-Auth-Token": "admin"}
FLAVOR_DUPLICATE = "berth.flavor.duplicate"
UNKNOWN = "7c0b6a3e-56f4-4d55-9b0e-0c9d5a0f9a11"
# A member of another project than the admin's.
MEMBER = {"X-Auth-Token": "u:p", "X-Roles": "member"}


@pytest.fixture
def plane(placement, cloud, tmp_path):
    made = ControlPlane(
        f"sqlite:///{tmp_path / 'conductor.sqlite'}", placement, selection=SelectionSettings(enabled_filters=[])
    )
    for name, agent in sorted(cloud.items()):
        made.register_host(name, agent.url, "zone-1", agent.token, "agent", admin=False)
    made.flavors.create({"name": PLAIN.name, "vcpus": 1, "ram": 512, "disk": 1})
    yield made
    made.close()


@pytest.fixture
def web(plane):
    return Client(create_app(plane))


@pytest.fixture
def active(plane):
    """An ACTIVE server."""
    from test_control_plane import ended

    [build] = plane.create_servers(Who("admin", "admin"), name="kept", flavor_ref=PLAIN.name)
    assert ended(plane, build.id).state == "done"
    yield build.instance_uuid
    ended(plane, plane.delete(build.instance_uuid).id)


def _rows(plane) -> dict[str, int]:
    with plane.journal.engine.connect() as conn:
        return {
            t.name: conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
            for t in [*tables.metadata.sorted_tables, *journal_metadata.sorted_tables]
        }


def _snapshot(plane) -> dict[str, object]:
    with plane.journal.engine.connect() as conn:
        return {
            t.name: sorted(map(tuple, conn.execute(sa.select(t)).all()), key=repr)
            for t in [*tables.metadata.sorted_tables, *journal_metadata.sorted_tables]
        }


def _bad(server):
    return [
        # (method, path, body or raw, headers, status, code)
        ("POST", "/servers", b"{not json", ADMIN, 400, "berth.undefined_code"),
        ("POST", "/servers", [], ADMIN, 400, "berth.undefined_code"),
        ("POST", "/servers", {}, ADMIN, 400, "berth.undefined_code"),
        ("POST", "/servers", {"server": {"flavorRef": PLAIN.name}}, ADMIN, 400, "berth.undefined_code"),
        ("POST", "/servers", {"server": {"name": "", "flavorRef": PLAIN.name}}, ADMIN, 400, "berth.undefined_code"),
        ("POST", "/servers", {"server": {"name": "x", "flavorRef": "nope"}}, ADMIN, 400, "berth.flavor.not_found"),
        (
            "POST",
            "/servers",
            {"server": {"name": "x", "flavorRef": PLAIN.name, "min_count": 3, "max_count": 2}},
            ADMIN,
            400,
            "berth.undefined_code",
        ),
        (
            "POST",
            "/servers",
            {"server": {"name": "x", "flavorRef": PLAIN.name, "max_count": 0}},
            ADMIN,
            400,
            "berth.undefined_code",
        ),
        (
            "POST",
            "/servers",
            {"server": {"name": "x", "flavorRef": PLAIN.name, "availability_zone": "atlantis"}},
            ADMIN,
            400,
            "berth.availability_zone.not_found",
        ),
        (
            "POST",
            "/servers",
            {"server": {"name": "x", "flavorRef": PLAIN.name}, "os:scheduler_hints": {"group": "not-a-uuid"}},
            ADMIN,
            400,
            "berth.undefined_code",
        ),
        (
            "POST",
            "/servers",
            {"server": {"name": "x", "flavorRef": PLAIN.name}, "os:scheduler_hints": {"group": UNKNOWN}},
            ADMIN,
            400,
            "berth.server_group.not_found",
        ),
        ("POST", "/servers", {"server": {"name": "x", "flavorRef": PLAIN.name}}, {"X-Auth-Token": "u:p"}, 403, None),
        ("POST", "/servers", {"server": {"name": "x", "flavorRef": PLAIN.name}}, {}, 401, None),
        ("GET", "/servers?status=SLEEPY", None, ADMIN, 400, "berth.query.invalid"),
        ("GET", f"/servers/{UNKNOWN}", None, ADMIN, 404, "berth.server.not_found"),
        ("DELETE", f"/servers/{UNKNOWN}", None, ADMIN, 404, "berth.server.not_found"),
        ("PATCH", f"/servers/{server}", {}, ADMIN, 405, "berth.undefined_code"),
        ("GET", "/no/such/path", None, ADMIN, 404, "berth.undefined_code"),
        ("POST", f"/servers/{server}/action", {}, ADMIN, 400, "berth.undefined_code"),
        ("POST", f"/servers/{server}/action", {"shelve": None, "migrate": None}, ADMIN, 400, "berth.undefined_code"),
        ("POST", f"/servers/{server}/action", {"reboot": None}, ADMIN, 400, "berth.undefined_code"),
        # What an action cannot do is refused, not ignored.
        (
            "POST",
            f"/servers/{server}/action",
            {"rebuild": {"image_properties": {"hw_a": "b"}}},
            ADMIN,
            400,
            "berth.undefined_code",
        ),
        ("POST", f"/servers/{server}/action", {"rebuild": {"name": "x"}}, ADMIN, 400, "berth.undefined_code"),
        ("POST", f"/servers/{server}/action", {"unshelve": {"bogus": 1}}, ADMIN, 400, "berth.undefined_code"),
        (
            "POST",
            "/servers",
            {"server": {"name": "x", "flavorRef": PLAIN.name, "metadata": {"": "empty key"}}},
            ADMIN,
            400,
            "berth.undefined_code",
        ),
        (
            "POST",
            "/servers",
            {"server": {"name": "x", "flavorRef": PLAIN.name, "metadata": {"k": 1}}},
            ADMIN,
            400,
            "berth.undefined_code",
        ),
        ("POST", f"/servers/{server}/action", {"resize": {}}, ADMIN, 400, "berth.undefined_code"),
        ("POST", f"/servers/{server}/action", {"resize": {"flavorRef": "nope"}}, ADMIN, 400, "berth.flavor.not_found"),
        (
            "POST",
            f"/servers/{server}/action",
            {"resize": {"flavorRef": PLAIN.name}},
            ADMIN,
            400,
            "berth.server.resize_same_flavor",
        ),
        (
            "POST",
            f"/servers/{server}/action",
            {"os-migrateLive": {"host": "alpha"}},
            ADMIN,
            400,
            "berth.undefined_code",
        ),
        ("POST", f"/servers/{server}/action", {"confirmResize": None}, ADMIN, 409, "berth.server.invalid_state"),
        ("POST", f"/servers/{server}/action", {"restore": None}, ADMIN, 409, "berth.server.invalid_state"),
        ("POST", f"/servers/{server}/action", {"evacuate": None}, ADMIN, 409, "berth.host.up"),
        ("POST", f"/servers/{UNKNOWN}/action", {"shelve": None}, ADMIN, 404, "berth.server.not_found"),
        ("POST", "/flavors", {"flavor": {"name": "f"}}, ADMIN, 400, "berth.undefined_code"),
        ("POST", "/flavors", {"flavor": {"name": "f", "vcpus": 0, "ram": 1}}, ADMIN, 400, "berth.undefined_code"),
        (
            "POST",
            "/flavors",
            {"flavor": {"name": PLAIN.name, "vcpus": 1, "ram": 1}},
            ADMIN,
            409,
            "berth.flavor.duplicate",
        ),
        (
            "POST",
            "/flavors",
            {"flavor": {"name": "g", "vcpus": 1, "ram": 1, "extra_specs": {"resources:VCPU": "many"}}},
            ADMIN,
            400,
            "berth.flavor.invalid",
        ),
        (
            "POST",
            "/flavors",
            {"flavor": {"name": "p", "vcpus": 1, "ram": 1, "extra_specs": {"berth:priority": "urgent"}}},
            ADMIN,
            400,
            "berth.flavor.invalid",
        ),
        (
            "POST",
            f"/flavors/{PLAIN.name}/os-extra_specs",
            {"extra_specs": {"berth:preemption_action": "pause"}},
            ADMIN,
            400,
            "berth.flavor.invalid",
        ),
        ("POST", "/flavors", {"flavor": {"name": "h", "vcpus": 1, "ram": 1}}, {"X-Auth-Token": "u:p"}, 403, None),
        ("GET", "/flavors/nope", None, ADMIN, 404, "berth.flavor.not_found"),
        ("DELETE", "/flavors/nope", None, ADMIN, 404, "berth.flavor.not_found"),
        (
            "POST",
            f"/flavors/{PLAIN.name}/os-extra_specs",
            {"extra_specs": {"trait:CUSTOM_X": "sometimes"}},
            ADMIN,
            400,
            "berth.flavor.invalid",
        ),
        ("DELETE", f"/flavors/{PLAIN.name}/os-extra_specs/nope", None, ADMIN, 404, "berth.flavor.extra_spec_not_found"),
        ("POST", "/os-server-groups", {"server_group": {"name": "g", "policy": "scatter"}}, ADMIN, 400, None),
        (
            "POST",
            "/os-server-groups",
            {"server_group": {"name": "g", "policy": "affinity", "rules": {"max_server_per_host": 2}}},
            ADMIN,
            400,
            "berth.undefined_code",
        ),
        ("GET", f"/os-server-groups/{UNKNOWN}", None, ADMIN, 404, "berth.server_group.not_found"),
        ("DELETE", f"/os-server-groups/{UNKNOWN}", None, ADMIN, 404, "berth.server_group.not_found"),
        ("PUT", "/hosts/new", {"host": {"url": "ftp://x"}}, ADMIN, 400, "berth.undefined_code"),
        ("PUT", "/hosts/new", {"host": {}}, ADMIN, 400, "berth.undefined_code"),
        ("PUT", "/hosts/new", {"host": {"url": "http://x"}}, {"X-Auth-Token": "u:p"}, 403, None),
        ("POST", "/hosts/nope/disable", {"reason": "x"}, ADMIN, 404, "berth.host.not_found"),
        ("POST", "/hosts/nope/evacuate", None, ADMIN, 404, "berth.host.not_found"),
        ("POST", "/hosts/wide/evacuate", None, ADMIN, 409, "berth.host.up"),
        ("DELETE", "/hosts/nope", None, ADMIN, 404, "berth.host.not_found"),
        ("GET", "/operations?state=dozing", None, ADMIN, 400, "berth.query.invalid"),
        ("GET", "/operations?limit=many", None, ADMIN, 400, "berth.query.invalid"),
        ("GET", "/operations?limit=-2", None, ADMIN, 400, "berth.query.invalid"),
        ("GET", f"/operations?marker={UNKNOWN}", None, ADMIN, 400, "berth.marker.not_found"),
        ("GET", "/servers?limit=-1", None, ADMIN, 400, "berth.query.invalid"),
        ("GET", "/servers/detail?limit=ten", None, ADMIN, 400, "berth.query.invalid"),
        ("GET", f"/servers?marker={UNKNOWN}", None, ADMIN, 400, "berth.marker.not_found"),
        ("GET", f"/servers?marker={server}", None, MEMBER, 400, "berth.marker.not_found"),
        ("GET", f"/operations/{UNKNOWN}", None, ADMIN, 404, "berth.operation.not_found"),
        ("GET", "/hosts", None, {"X-Auth-Token": "u:p"}, 403, None),
        ("GET", "/servers?name=%28unclosed", None, ADMIN, 400, "berth.query.invalid"),
    ]


def test_every_bad_request_is_refused_with_a_code_and_writes_nothing(plane, web, active):
    before = _snapshot(plane)
    for method, path, body, headers, status, code in _bad(active):
        kwargs: dict[str, object] = {"headers": headers}
        if isinstance(body, bytes):
            kwargs.update(data=body, content_type="application/json")
        elif body is not None:
            kwargs["json"] = body
        answer = web.open(path, method=method, **kwargs)
        what = f"{method} {path} {body!r}"
        assert answer.status_code == status, f"{what}: {answer.status_code} {answer.get_data(as_text=True)}"
        error = answer.get_json()["errors"][0]
        assert error["status"] == status and error["detail"] and error["request_id"], what
        assert error["code"], what
        if code is not None:
            assert error["code"] == code, f"{what}: {error}"
    assert _snapshot(plane) == before


def test_a_server_joins_no_group_of_another_project(plane, web):
    """A member naming the admin project's group is told there is no such group, and nothing is
    written; the group's owner may join it."""
    group = plane.groups.create("theirs", "anti-affinity", {}, "admin", "admin")
    body = {"server": {"name": "x", "flavorRef": PLAIN.name}, "os:scheduler_hints": {"group": group}}
    before = _snapshot(plane)
    answer = web.post("/servers", json=body, headers=MEMBER)
    assert answer.status_code == 400, answer.get_data(as_text=True)
    assert answer.get_json()["errors"][0]["code"] == "berth.server_group.not_found"
    assert _snapshot(plane) == before
    assert plane.servers.in_group(group) == []
    own = web.post("/servers", json=body, headers=ADMIN)
    assert own.status_code == 202, own.get_data(as_text=True)
    assert plane.servers.in_group(group) == [own.get_json()["server"]["id"]]


def test_a_zone_naming_a_host_is_refused_saying_the_scheduler_chooses(plane, web):
    """Nova's forced host ("zone:host"): not "no host registered in the zone", which sends the caller
    looking for a zone that exists."""
    before = _snapshot(plane)
    for zone in ("zone-1:host-1", "zone-1::node-1"):
        body = {"server": {"name": "x", "flavorRef": PLAIN.name, "availability_zone": zone}}
        answer = web.post("/servers", json=body, headers=ADMIN)
        assert answer.status_code == 400, answer.get_data(as_text=True)
        error = answer.get_json()["errors"][0]
        assert error["code"] == "berth.availability_zone.not_found"
        assert "names a host" in error["detail"] and "name the zone alone" in error["detail"], error
    assert _snapshot(plane) == before


def test_a_flavor_is_created_with_the_body_novas_clients_send(plane, web):
    """novaclient and the openstack command send rxtx_factor and os-flavor-access:is_public with every
    create (they were refused, so neither could make a flavor); values Berth cannot honour are refused."""
    sent = {
        "name": "nova-client",
        "ram": 512,
        "vcpus": 1,
        "disk": 1,
        "id": None,
        "swap": 0,
        "OS-FLV-EXT-DATA:ephemeral": 0,
        "rxtx_factor": 1.0,
        "os-flavor-access:is_public": True,
    }
    before = _snapshot(plane)
    for key, value in (("rxtx_factor", 2.0), ("os-flavor-access:is_public", False)):
        answer = web.post("/flavors", json={"flavor": {**sent, key: value}}, headers=ADMIN)
        assert answer.status_code == 400, answer.get_data(as_text=True)
        assert key in answer.get_json()["errors"][0]["detail"]
    assert _snapshot(plane) == before
    answer = web.post("/flavors", json={"flavor": sent}, headers=ADMIN)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    shown = answer.get_json()["flavor"]
    assert (shown["name"], shown["ram"], shown["vcpus"], shown["disk"]) == ("nova-client", 512, 1, 1)
    assert shown["rxtx_factor"] == 1.0 and shown["os-flavor-access:is_public"] is True
    assert shown["OS-FLV-DISABLED:disabled"] is False
    web.delete(f"/flavors/{shown['id']}", headers=ADMIN)


def test_the_openapi_document_names_every_route_and_its_body(web):
    document = web.get("/berth/openapi.json").get_json()
    assert document["openapi"].startswith("3.")
    assert document["paths"]["/servers"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert "x-policy" in document["paths"]["/hosts"]["get"]
    assert {"/servers/{server_id}/action", "/operations/{operation_id}", "/hosts/{name}/evacuate"} <= set(
        document["paths"]
    )


def test_the_metrics_count_operations_by_kind_and_state(web, active):
    text = web.get("/metrics", headers=ADMIN).get_data(as_text=True)
    assert 'berth_conductor_operations_total{kind="build",state="done"}' in text
    assert "berth_conductor_takeovers_total" in text
    assert web.get("/metrics", headers={"X-Auth-Token": "u:p"}).status_code == 403


def test_servers_are_listed_by_name_host_and_status(web, active, plane):
    host = plane.servers.get(active)["host"]
    for query, found in [
        ("name=kept", [active]),
        ("name=other", []),
        # A regular expression searched in the name, as Nova takes it.
        ("name=ep", [active]),
        ("name=%5Ek.pt%24", [active]),
        ("name=%5Eep", []),
        (f"host={host}", [active]),
        ("host=nowhere", []),
        ("status=active", [active]),
        ("status=SHELVED", []),
    ]:
        answer = web.get(f"/servers?{query}", headers=ADMIN).get_json()["servers"]
        assert [s["id"] for s in answer] == found, query


def test_a_flavor_is_named_by_its_url_too_and_locations_are_absolute(web, plane):
    from test_control_plane import ended

    body = {"server": {"name": "by-url", "flavorRef": f"http://localhost/flavors/{PLAIN.name}"}}
    answer = web.post("/servers", json=body, headers=ADMIN)
    assert answer.status_code == 202, answer.get_data(as_text=True)
    made = answer.get_json()["server"]
    assert answer.headers["Location"] == f"http://localhost/servers/{made['id']}"
    assert ended(plane, made["operation_id"]).state == "done"
    shown = web.get(f"/servers/{made['id']}", headers=ADMIN).get_json()["server"]
    assert shown["flavor"]["original_name"] == PLAIN.name
    deleted = web.delete(f"/servers/{made['id']}", headers=ADMIN)
    operation = deleted.get_json()["operation"]["id"]
    assert deleted.headers["Location"] == f"http://localhost/operations/{operation}"
    ended(plane, operation)


def test_a_servers_metadata_is_kept_and_shown(web, plane):
    from test_control_plane import ended

    body = {"server": {"name": "tagged", "flavorRef": PLAIN.name, "metadata": {"role": "db", "tier": "gold"}}}
    answer = web.post("/servers", json=body, headers=ADMIN)
    assert answer.status_code == 202, answer.get_data(as_text=True)
    made = answer.get_json()["server"]
    assert ended(plane, made["operation_id"]).state == "done"
    shown = web.get(f"/servers/{made['id']}", headers=ADMIN).get_json()["server"]
    assert shown["metadata"] == {"role": "db", "tier": "gold"}
    ended(plane, plane.delete(made["id"]).id)


def test_deleted_servers_are_listed_by_their_status(web, plane):
    from test_control_plane import ended

    [build] = plane.create_servers(Who("admin", "admin"), name="gone", flavor_ref=PLAIN.name)
    assert ended(plane, build.id).state == "done"
    assert ended(plane, plane.delete(build.instance_uuid).id).state == "done"
    for query in ("status=DELETED", "status=deleted", "status=deleted&deleted=1"):
        answer = web.get(f"/servers?{query}", headers=ADMIN).get_json()["servers"]
        assert [(s["id"], s["status"]) for s in answer] == [(build.instance_uuid, "DELETED")], query
    assert web.get("/servers?status=ACTIVE", headers=ADMIN).get_json()["servers"] == []


def test_a_server_shows_novas_vm_state_and_fault(web, plane, active):
    """The vm_state in Nova's words, not the status lowercased; a fault with Nova's code, time and
    message, gone once an operation ends well."""
    from test_control_plane import ended

    def shown(server_id: str) -> dict:
        return web.get(f"/servers/{server_id}", headers=ADMIN).get_json()["server"]

    assert (shown(active)["OS-EXT-STS:vm_state"], "fault" in shown(active)) == ("active", False)
    plane.flavors.create({"name": "huge", "vcpus": 64, "ram": 1024, "disk": 1})
    [build] = plane.create_servers(Who("admin", "admin"), name="huge", flavor_ref="huge")
    ended(plane, build.id)
    failed = shown(build.instance_uuid)
    assert (failed["status"], failed["OS-EXT-STS:vm_state"]) == ("ERROR", "error")
    assert failed["fault"]["code"] == 500 and "No valid host" in failed["fault"]["message"]
    assert failed["updated"] <= failed["fault"]["created"] <= failed["updated"], failed
    ended(plane, plane.delete(build.instance_uuid).id)
    [gone] = web.get("/servers?deleted=1&name=huge", headers=ADMIN).get_json()["servers"]
    assert (gone["OS-EXT-STS:vm_state"], "fault" in gone) == ("deleted", False)
    assert plane.servers.get(build.instance_uuid, deleted=True)["fault_at"] is None
    assert server_states.VM_STATES[server_states.VERIFY_RESIZE] == "resized"
    assert server_states.VM_STATES[server_states.SOFT_DELETED] == "soft-delete"
    assert set(server_states.VM_STATES) == set(server_states.STATUSES)


def _pages(web, path: str, collection: str, limit: int) -> list[list[str]]:
    """The ids of each page of a list, following its ``next`` links (which keep the query's other
    parameters and name the page's last item as the next marker)."""
    pages: list[list[str]] = []
    href = f"{path}{'&' if '?' in path else '?'}limit={limit}"
    while href:
        body = web.get(href, headers=ADMIN).get_json()
        pages.append([item["id"] for item in body[collection]])
        links = body.get(f"{collection}_links", [])
        href = ""
        if links:
            [link] = links
            assert link["rel"] == "next"
            asked = parse_qs(urlsplit(link["href"]).query)
            assert asked.pop("limit") == [str(limit)] and asked.pop("marker") == [pages[-1][-1]]
            assert asked == parse_qs(urlsplit(path).query)
            href = f"{urlsplit(link['href']).path}?{urlsplit(link['href']).query}"
    return pages


def test_servers_and_operations_are_listed_newest_first_a_page_at_a_time(web, plane, active):
    from test_control_plane import ended

    builds = [plane.create_servers(Who("admin", "admin"), name=f"page-{n}", flavor_ref=PLAIN.name)[0] for n in range(4)]
    for build in builds:
        assert ended(plane, build.id).state == "done"
    try:
        everyone = web.get("/servers", headers=ADMIN).get_json()
        ids = [s["id"] for s in everyone["servers"]]
        assert ids == [b.instance_uuid for b in reversed(builds)] + [active]
        assert "servers_links" not in everyone
        assert _pages(web, "/servers", "servers", 2) == [ids[0:2], ids[2:4], ids[4:]]
        assert _pages(web, "/servers/detail?status=ACTIVE", "servers", 5) == [ids, []]
        builds_run = [op["id"] for op in web.get("/operations?kind=build", headers=ADMIN).get_json()["operations"]]
        assert builds_run[:4] == [b.id for b in reversed(builds)]
        assert sum(_pages(web, "/operations?kind=build", "operations", 3), []) == builds_run
        assert (
            _pages(web, f"/operations?server_id={active}", "operations", 1)[0]
            == [op["id"] for op in web.get(f"/operations?server_id={active}", headers=ADMIN).get_json()["operations"]][
                :1
            ]
        )
        # A marker must be an item of the list asked for: an operation of another server is not.
        other = web.get(f"/operations?server_id={active}&marker={builds[0].id}", headers=ADMIN)
        assert other.status_code == 400 and other.get_json()["errors"][0]["code"] == "berth.marker.not_found"
    finally:
        for build in builds:
            ended(plane, plane.delete(build.instance_uuid).id)


def test_a_resize_of_a_server_in_no_state_to_resize_is_refused_for_its_state_first(plane, web, active):
    """As Nova: the server's state is checked before the resize's flavor is read (409, not 400)."""
    from test_control_plane import ended

    assert ended(plane, plane.act(active, "shelve").id).state == "done"
    before = _snapshot(plane)
    for flavor in ("nope", PLAIN.name):
        answer = web.post(f"/servers/{active}/action", json={"resize": {"flavorRef": flavor}}, headers=ADMIN)
        assert answer.status_code == 409, answer.get_data(as_text=True)
        assert answer.get_json()["errors"][0]["code"] == "berth.server.invalid_state"
    assert _snapshot(plane) == before


def test_a_compute_node_no_agent_registered_is_never_chosen(plane):
    """As Nova schedules only to the compute nodes of its compute services: a node in the service
    whose agent never registered (an agent run with --once, one pointed at the wrong conductors)
    is not tried, however much room it has."""
    from test_control_plane import ended

    ghost = "7c0b6a3e-56f4-4d55-9b0e-0c9d5a0f9a12"
    placement = plane.placement
    placement.request("POST", "/resource_providers", {"name": "ghost", "uuid": ghost})
    inventories = {"VCPU": {"total": 256}, "MEMORY_MB": {"total": 1048576}, "DISK_GB": {"total": 100000}}
    placement.request(
        "PUT",
        f"/resource_providers/{ghost}/inventories",
        {"resource_provider_generation": 0, "inventories": inventories},
    )
    placement.request(
        "PUT", f"/resource_providers/{ghost}/traits", {"resource_provider_generation": 1, "traits": ["COMPUTE_NODE"]}
    )
    try:
        for name in ("a", "b", "c"):
            [build] = plane.create_servers(Who("admin", "admin"), name=name, flavor_ref=PLAIN.name)
            done = ended(plane, build.id)
            assert done.state == "done" and done.attempts == [], done.attempts
            assert done.selections["host"] != "ghost"
            ended(plane, plane.delete(build.instance_uuid).id)
        assert "ghost" in plane.scheduler_config.unknown_hosts
    finally:
        placement.request("DELETE", f"/resource_providers/{ghost}")


def test_a_host_that_changes_zone_leaves_the_old_zones_aggregate(plane, cloud):
    """Its old zone, which no other host may be left in, is left too; and back again."""
    from berth.conductor.control.host_books import zone_aggregate

    name, agent = sorted(cloud.items())[0]
    root = plane.placement.find_provider(name)["uuid"]

    def zones_of_node() -> set[str]:
        _, aggregates = plane.placement.get_aggregates(root)
        return {zone for zone in ("zone-1", "lonely", "other") if zone_aggregate(zone) in aggregates}

    try:
        plane.register_host(name, agent.url, "lonely", agent.token, "agent", admin=False)
        assert zones_of_node() == {"lonely"}
        plane.register_host(name, agent.url, "other", agent.token, "agent", admin=False)
        assert zones_of_node() == {"other"}
        plane.register_host(name, agent.url, "lonely", agent.token, "agent", admin=False)
        assert zones_of_node() == {"lonely"}
    finally:
        plane.register_host(name, agent.url, "zone-1", agent.token, "agent", admin=False)
    assert zones_of_node() == {"zone-1"}


def test_a_host_with_no_compute_node_yet_is_not_disabled_but_told_so(plane, web):
    plane.register_host("unreported", "http://127.0.0.1:9", "zone-1", None, "agent", admin=False)
    try:
        answer = web.post("/hosts/unreported/disable", json={}, headers=ADMIN)
        assert answer.status_code == 409, answer.get_data(as_text=True)
        assert answer.get_json()["errors"][0]["code"] == "berth.host.not_reported"
        assert not plane.hosts.get("unreported").disabled
    finally:
        plane.hosts.retire("unreported", "agent", admin=True)


def test_a_move_being_finished_makes_another_finish_wait_as_for_any_busy_server(plane, active):
    """A confirm or revert that finds the move's other finish running in the journal (before its
    own start's check of the server's slot) is told the server is busy, as any racing action is."""
    from test_control_plane import ended

    from berth.conductor.errors import ServerBusy
    from berth.conductor.operations import moves

    moved = ended(plane, plane.act(active, "migrate").id)
    assert moved.state == "done", moved.error
    runner = plane.conductor.runner
    confirming = plane.journal.start(moves.CONFIRM, active, {"move": moved.id}, runner.owner)
    try:
        with pytest.raises(ServerBusy) as busy:
            moves.finish(runner, moved.id, moves.REVERT)
        assert confirming.id in str(busy.value)
    finally:
        runner.end(confirming, "failed", "ended by the test")


def test_retiring_a_host_has_a_rule_of_its_own(plane, tmp_path):
    """An operator may keep retiring hosts to the admin while agents (the service role) register."""
    from berth.conductor.api.app import ApiSettings

    rules = tmp_path / "policy.yaml"
    rules.write_text('"berth:hosts:retire": "role:admin"\n')
    web = Client(create_app(plane, ApiSettings(policy_file=str(rules))))
    service = {"X-Auth-Token": "agent:svc", "X-Roles": "service"}
    body = {"host": {"url": "http://127.0.0.1:9", "zone": "zone-1"}}
    assert web.put("/hosts/retiring", json=body, headers=service).status_code in (200, 201)
    refused = web.delete("/hosts/retiring", headers=service)
    assert refused.status_code == 403 and "berth:hosts:retire" in refused.get_json()["errors"][0]["detail"]
    assert web.delete("/hosts/retiring", headers=ADMIN).status_code == 204


def test_a_host_an_operation_in_flight_places_a_server_on_is_not_retired(plane, web, active):
    """A build's (or a move's) server names its host only once it is there: until then the
    operation's destinations do, and the host may not be retired from under it."""
    plane.register_host("idle", "http://127.0.0.1:9", "zone-1", None, "admin", admin=True)
    moving = plane.journal.start("migrate", active, {"source": plane.servers.get(active)["host"]}, "the-test")
    moving.selections["destinations"] = [{"host": "idle", "root_provider_uuid": UNKNOWN}]
    plane.journal.save(moving)
    try:
        refused = web.delete("/hosts/idle", headers=ADMIN)
        assert refused.status_code == 409, refused.get_data(as_text=True)
        assert refused.get_json()["errors"][0]["code"] == "berth.host.in_use"
        assert moving.id in refused.get_json()["errors"][0]["detail"]
    finally:
        plane.conductor.runner.end(moving, "failed", "ended by the test")
    assert web.delete("/hosts/idle", headers=ADMIN).status_code == 204


def test_a_request_is_followed_by_its_id_into_the_services_log(plane, web, placement_service):
    """The caller's X-Openstack-Request-Id (else the conductors' own request id) is sent with the
    calls the request and the operation it starts make, and the service logs it as
    global_request_id, as Nova passes its request's id to Placement."""
    import uuid

    from test_control_plane import ended

    given = f"req-{uuid.uuid4()}"
    body = {"server": {"name": "followed", "flavorRef": PLAIN.name}}
    answer = web.post("/servers", json=body, headers={**ADMIN, "X-Openstack-Request-Id": given})
    assert answer.status_code == 202, answer.get_data(as_text=True)
    made = answer.get_json()["server"]
    assert ended(plane, made["operation_id"]).state == "done"
    logged = [line for line in placement_service.server.log_text().splitlines() if f"global_request_id={given}" in line]
    assert any("/berth/pick" in line or "/allocation_candidates" in line for line in logged), logged
    own = web.delete(f"/servers/{made['id']}", headers=ADMIN)
    ended(plane, own.get_json()["operation"]["id"])
    own_id = own.headers["X-Openstack-Request-Id"]
    assert f"global_request_id={own_id}" in placement_service.server.log_text()
