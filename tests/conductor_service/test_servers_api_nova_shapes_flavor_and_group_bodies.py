"""Flavor and server group bodies as Nova's API takes them, against live conductors: a flavor's sizes
and a group's ``max_server_per_host`` given as digits (``"2"``; a 400), a flavor name with whitespace
around it (taken; Nova refuses it), extra specs set with none at all (a 400) and answered with those
sent (every spec the flavor had was answered), and ``all_projects`` read by its presence, as Nova's
server groups read it (bare, it listed the caller's project's groups only)."""

from __future__ import annotations

import pytest
from servicehelpers import ensure_flavors, refused

from berth.clients.conductor import ConductorClient

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def flavors(cloud):
    ensure_flavors(cloud.client())


def flavor_names(client: ConductorClient) -> set[str]:
    return {f["name"] for f in client.get("/flavors")["flavors"]}


def test_a_flavors_sizes_given_as_digits_are_taken_as_their_numbers(cloud):
    """Nova's flavor sizes are integers or their digits (its ``flavor_param_positive`` and
    ``flavor_param_non_negative``); digits were a 400."""
    client = cloud.client()
    sizes = {"vcpus": "2", "ram": "768", "disk": "3", "OS-FLV-EXT-DATA:ephemeral": "1", "swap": "0"}
    made = client.request("POST", "/flavors", {"flavor": {"name": "digits", **sizes}})["flavor"]
    shown = client.get(f"/flavors/{made['id']}")["flavor"]
    assert (shown["vcpus"], shown["ram"], shown["disk"], shown["OS-FLV-EXT-DATA:ephemeral"], shown["swap"]) == (
        2,
        768,
        3,
        1,
        0,
    )
    client.request("DELETE", f"/flavors/{made['id']}")


@pytest.mark.parametrize(
    "sizes",
    [
        {"vcpus": "0", "ram": "256"},  # digits are held to the number's bounds
        {"vcpus": "1", "ram": "2147483648"},
        {"vcpus": "1", "ram": "256", "disk": "-1"},
        {"vcpus": "1.5", "ram": "256"},
        {"vcpus": "one", "ram": "256"},
        {"vcpus": "1", "ram": "256", "swap": ""},
    ],
)
def test_sizes_that_are_no_number_in_bounds_are_still_refused(cloud, sizes):
    client = cloud.client()
    error = refused(client, "POST", "/flavors", {"flavor": {"name": "not-sized", **sizes}})
    assert error.status == 400 and error.code == "berth.undefined_code", error
    assert "not-sized" not in flavor_names(client)


@pytest.mark.parametrize("name", [" padded", "padded ", "\tpadded", "padded\n"])
def test_a_flavor_name_with_whitespace_around_it_is_refused_as_novas_is(cloud, name):
    """Nova's flavor name (its ``name`` parameter type) may not start or end with whitespace; it was taken."""
    client = cloud.client()
    error = refused(client, "POST", "/flavors", {"flavor": {"name": name, "vcpus": 1, "ram": 256, "disk": 1}})
    assert error.status == 400 and error.code == "berth.undefined_code", error
    assert name not in flavor_names(client) and name.strip() not in flavor_names(client)


def test_a_flavor_name_with_a_space_inside_is_taken(cloud):
    client = cloud.client()
    made = client.request("POST", "/flavors", {"flavor": {"name": "two words", "vcpus": 1, "ram": 256, "disk": 1}})
    assert made["flavor"]["name"] == "two words"
    client.request("DELETE", f"/flavors/{made['flavor']['id']}")


def test_extra_specs_set_are_answered_as_sent_and_none_at_all_is_taken(cloud):
    """Nova takes ``{"extra_specs": {}}`` (200) and answers a create with the extra specs it was sent."""
    client = cloud.client()
    body = {"flavor": {"name": "specs-answered", "vcpus": 2, "ram": 256, "extra_specs": {"hw:numa_nodes": "1"}}}
    made = client.request("POST", "/flavors", body)["flavor"]
    path = f"/flavors/{made['id']}/os-extra_specs"
    assert client.request("POST", path, {"extra_specs": {}}) == {"extra_specs": {}}
    assert client.get(path)["extra_specs"] == {"hw:numa_nodes": "1"}
    # The one sent (as kept: a number as its text), not the flavor's others.
    assert client.request("POST", path, {"extra_specs": {"berth:priority": 5}}) == {
        "extra_specs": {"berth:priority": "5"}
    }
    assert client.get(path)["extra_specs"] == {"hw:numa_nodes": "1", "berth:priority": "5"}
    client.request("DELETE", f"/flavors/{made['id']}")


def test_max_server_per_host_given_as_digits_is_taken_as_its_number(cloud):
    """Nova's rule is an integer or its digits (its ``positive_integer``); digits were a 400."""
    client = cloud.client()
    asked = {"name": "two-a-host", "policy": "anti-affinity", "rules": {"max_server_per_host": "2"}}
    group = client.request("POST", "/os-server-groups", {"server_group": asked})["server_group"]
    assert group["rules"] == {"max_server_per_host": 2}
    assert client.get(f"/os-server-groups/{group['id']}")["server_group"]["rules"] == {"max_server_per_host": 2}
    client.request("DELETE", f"/os-server-groups/{group['id']}")
    for value in ("0", "two", "1.5", ""):
        asked = {"name": "not-ruled", "policy": "anti-affinity", "rules": {"max_server_per_host": value}}
        error = refused(client, "POST", "/os-server-groups", {"server_group": asked})
        assert error.status == 400, (value, error)
    assert "not-ruled" not in {g["name"] for g in client.get("/os-server-groups")["server_groups"]}


def test_all_projects_asks_for_every_projects_groups_by_its_presence(cloud):
    """Nova's server groups read ``all_projects`` by its presence (``'all_projects' in req.GET``):
    bare or with any value, an admin's list holds every project's groups."""
    admin = cloud.client()
    member = ConductorClient(cloud.conductors[0].url, "bob:project-b", roles=["member"])
    theirs = member.request("POST", "/os-server-groups", {"server_group": {"name": "theirs", "policy": "affinity"}})
    theirs_id = theirs["server_group"]["id"]
    try:
        assert theirs_id not in {g["id"] for g in admin.get("/os-server-groups")["server_groups"]}
        for query in ("all_projects", "all_projects=", "all_projects=all", "all_projects=1"):
            listed = {g["id"] for g in admin.get(f"/os-server-groups?{query}")["server_groups"]}
            assert theirs_id in listed, query
    finally:
        member.request("DELETE", f"/os-server-groups/{theirs_id}")
