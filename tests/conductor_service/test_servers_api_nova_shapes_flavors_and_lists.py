"""Flavors and lists as Nova's API takes them, against live conductors: a flavor's id given as a
number, extra specs whose values are numbers, and ``all_tenants`` read as Nova reads it (bare, it
asks for every project's servers; a value that is no flag is a 400, not one project's list)."""

from __future__ import annotations

import pytest
from servicehelpers import build, ended, ensure_flavors, refused

from berth.clients.conductor import ConductorClient

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def flavors(cloud):
    ensure_flavors(cloud.client())


def test_a_flavor_id_given_as_a_number_is_kept_as_its_text(cloud):
    """Nova's flavor create takes an ``id`` that is a string, a number or null; a number was a 400."""
    client = cloud.client()
    made = client.request("POST", "/flavors", {"flavor": {"name": "id-as-number", "id": 31, "vcpus": 1, "ram": 256}})
    assert made["flavor"]["id"] == "31"
    assert client.get("/flavors/31")["flavor"]["name"] == "id-as-number"
    client.request("DELETE", "/flavors/31")
    # 0 is an id as any other number (not one left out, for which an id is made up).
    zero = client.request("POST", "/flavors", {"flavor": {"name": "id-zero", "id": 0, "vcpus": 1, "ram": 256}})
    assert zero["flavor"]["id"] == "0"
    client.request("DELETE", "/flavors/0")


def test_extra_spec_values_given_as_numbers_are_kept_as_their_text(cloud):
    """Nova takes an extra spec's value as a string or a number (and keeps its text); a number was a 400."""
    client = cloud.client()
    made = client.request(
        "POST",
        "/flavors",
        {"flavor": {"name": "numbered-specs", "vcpus": 2, "ram": 256, "extra_specs": {"hw:numa_nodes": 1}}},
    )["flavor"]
    assert made["extra_specs"] == {"hw:numa_nodes": "1"}
    path = f"/flavors/{made['id']}/os-extra_specs"
    # Answered as Nova answers it, with the specs sent (as kept); the flavor has both.
    assert client.request("POST", path, {"extra_specs": {"berth:priority": 5}})["extra_specs"] == {
        "berth:priority": "5"
    }
    assert client.get(path)["extra_specs"] == {"hw:numa_nodes": "1", "berth:priority": "5"}
    assert client.request("PUT", f"{path}/berth:priority", {"berth:priority": 7}) == {"berth:priority": "7"}
    assert client.get(f"{path}/berth:priority") == {"berth:priority": "7"}
    # A number is still checked as the scheduler reads it, and other types are still refused.
    assert refused(client, "PUT", f"{path}/berth:priority", {"berth:priority": 1.5}).code == "berth.flavor.invalid"
    assert refused(client, "PUT", f"{path}/berth:priority", {"berth:priority": True}).status == 400
    assert client.get(path)["extra_specs"] == {"hw:numa_nodes": "1", "berth:priority": "7"}
    client.request("DELETE", f"/flavors/{made['id']}")


def test_all_tenants_is_read_as_nova_reads_it(cloud):
    admin = cloud.client()
    member = ConductorClient(cloud.conductors[0].url, "bob:project-b", roles=["member"])
    server = build(admin, "every-project")
    theirs = build(member, "theirs")
    try:
        # The admin's bare ``all_tenants`` lists another project's server too, as Nova's does (it
        # listed the admin's own project only); so does any word Nova takes for true.
        for query in ("all_tenants", "all_tenants=", "all_tenants=on", "all_tenants=True", "all_projects=1"):
            listed = {s["id"] for s in admin.get(f"/servers?{query}")["servers"]}
            assert {server["id"], theirs["id"]} <= listed, query
        for query in ("all_tenants=0", "all_tenants=off", "all_tenants=false"):
            listed = {s["id"] for s in admin.get(f"/servers?{query}")["servers"]}
            assert server["id"] in listed and theirs["id"] not in listed, query
        for path in ("/servers?all_tenants=everyone", "/operations?all_projects=maybe"):
            error = refused(admin, "GET", path)
            assert error.status == 400 and error.code == "berth.query.invalid", error
    finally:
        for made in (server, theirs):
            assert ended(admin, admin.request("DELETE", f"/servers/{made['id']}")["operation"]["id"])["state"] == "done"
