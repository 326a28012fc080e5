"""A server create's counts and the names of servers and server groups as Nova's API takes them,
against live conductors: ``min_count``/``max_count`` given as digits (``"2"``, Nova's
``positive_integer``; a 400), and a server's or a group's name with whitespace at either end
(taken; Nova's ``name`` parameter type refuses it, as it does a flavor's)."""

from __future__ import annotations

import pytest
from servicehelpers import ended, ensure_flavors, refused

from berth.clients.conductor import ConductorClient

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def flavors(cloud):
    ensure_flavors(cloud.client())


def named(client: ConductorClient, name: str) -> list[dict]:
    """The servers of that name, deleted or not."""
    return [s for query in ("", "deleted=1") for s in client.get(f"/servers?{query}")["servers"] if s["name"] == name]


def test_counts_given_as_digits_are_taken_as_their_numbers(cloud):
    client = cloud.client()
    body = {"server": {"name": "counted", "flavorRef": "small", "min_count": "1", "max_count": "2"}}
    made = client.request("POST", "/servers", body)
    assert len(made["servers"]) == 2
    for server in made["servers"]:
        assert ended(client, server["operation_id"])["state"] == "done"
    for server in made["servers"]:
        assert ended(client, client.request("DELETE", f"/servers/{server['id']}")["operation"]["id"])["state"] == "done"


@pytest.mark.parametrize(
    "counts",
    [
        {"max_count": "0"},  # digits are held to the number's bounds
        {"max_count": "1001"},
        {"min_count": "1.5"},
        {"min_count": "two"},
        {"max_count": ""},
        {"min_count": "3", "max_count": "2"},
    ],
)
def test_counts_that_are_no_number_in_bounds_are_still_refused(cloud, counts):
    client = cloud.client()
    error = refused(client, "POST", "/servers", {"server": {"name": "not-counted", "flavorRef": "small", **counts}})
    assert error.status == 400, error
    assert named(client, "not-counted") == []


_PADDED = [" padded", "padded ", "\tpadded", "padded\n"]


@pytest.mark.parametrize("name", _PADDED)
def test_a_server_name_with_whitespace_around_it_is_refused_as_novas_is(cloud, name):
    client = cloud.client()
    error = refused(client, "POST", "/servers", {"server": {"name": name, "flavorRef": "small"}})
    assert error.status == 400 and error.code == "berth.undefined_code", error
    assert named(client, name) == [] and named(client, name.strip()) == []


@pytest.mark.parametrize("name", _PADDED)
def test_a_server_group_name_with_whitespace_around_it_is_refused_as_novas_is(cloud, name):
    client = cloud.client()
    error = refused(client, "POST", "/os-server-groups", {"server_group": {"name": name, "policy": "affinity"}})
    assert error.status == 400 and error.code == "berth.undefined_code", error
    assert name not in {g["name"] for g in client.get("/os-server-groups")["server_groups"]}


def test_names_with_a_space_inside_are_taken(cloud):
    client = cloud.client()
    group = client.request("POST", "/os-server-groups", {"server_group": {"name": "two words", "policy": "affinity"}})
    assert group["server_group"]["name"] == "two words"
    client.request("DELETE", f"/os-server-groups/{group['server_group']['id']}")
    made = client.request("POST", "/servers", {"server": {"name": "two words", "flavorRef": "small"}})["server"]
    assert ended(client, made["operation_id"])["state"] == "done"
    assert client.get(f"/servers/{made['id']}")["server"]["name"] == "two words"
    assert ended(client, client.request("DELETE", f"/servers/{made['id']}")["operation"]["id"])["state"] == "done"
