"""Server action bodies as Nova's API takes them, against live conductors: a ``flavorRef`` that is a
flavor's id as a number, ``migrate`` with ``host: null``, and the flags of a live migration and of an
evacuation, which must be booleans (or one of the words for one; ``auto`` for ``block_migration``)."""

from __future__ import annotations

import pytest
from servicehelpers import act, build, ended, ensure_flavors, refused

from berth.clients.conductor import ConductorClient

pytestmark = pytest.mark.slow

# A flavor whose id is a number, as an operator of Nova often makes them (``--id 4242``).
NUMBERED = {"name": "numbered", "id": "4242", "vcpus": 1, "ram": 768, "disk": 1}


@pytest.fixture(autouse=True)
def flavors(cloud):
    client = cloud.client()
    ensure_flavors(client)
    if "numbered" not in {f["name"] for f in client.get("/flavors")["flavors"]}:
        client.request("POST", "/flavors", {"flavor": NUMBERED})


def deleted(client: ConductorClient, server_id: str) -> None:
    assert ended(client, client.request("DELETE", f"/servers/{server_id}")["operation"]["id"])["state"] == "done"


def test_a_flavor_id_given_as_a_number_is_taken_as_novas_flavor_ref_is(cloud):
    """Nova's ``flavorRef`` is a string or an integer; an integer was a 400 ("not of type 'string'")."""
    client = cloud.client()
    assert client.get("/flavors/4242")["flavor"]["name"] == "numbered"
    made = client.request("POST", "/servers", {"server": {"name": "by-number", "flavorRef": 4242}})["server"]
    assert ended(client, made["operation_id"])["state"] == "done"
    assert client.get(f"/servers/{made['id']}")["server"]["flavor"]["original_name"] == "numbered"
    # A resize to it by its number finds it: the flavor the server has.
    error = refused(client, "POST", f"/servers/{made['id']}/action", {"resize": {"flavorRef": 4242}})
    assert error.status == 400 and error.code == "berth.server.resize_same_flavor", error
    small = build(client, "to-number")
    assert act(client, small["id"], "resize", {"flavorRef": 4242})["state"] == "done"
    assert client.get(f"/servers/{small['id']}")["server"]["flavor"]["original_name"] == "numbered"
    deleted(client, small["id"])
    deleted(client, made["id"])


def test_migrate_takes_a_null_host_as_novas_does(cloud):
    """Nova's ``migrate`` takes ``{"host": null}`` (the scheduler chooses), as the live migration and
    the evacuation take it here; it was a 400."""
    client = cloud.client()
    server = build(client, "migrated-null-host")
    moved = act(client, server["id"], "migrate", {"host": None})
    assert moved["state"] == "done" and moved["kind"] == "migrate", moved
    assert act(client, server["id"], "confirmResize")["state"] == "done"
    deleted(client, server["id"])


@pytest.mark.parametrize(
    "action, arguments",
    [
        ("os-migrateLive", {"host": None, "block_migration": 7}),
        ("os-migrateLive", {"host": None, "block_migration": "maybe"}),
        ("os-migrateLive", {"host": None, "block_migration": False, "disk_over_commit": {}}),
        ("evacuate", {"onSharedStorage": 7}),
    ],
)
def test_a_flag_that_is_no_boolean_is_refused_before_anything_starts(cloud, action, arguments):
    """Nova refuses them (400, its ``boolean`` parameter type); a live migration used to start."""
    client = cloud.client()
    server = build(client, "flagged")
    before = client.get(f"/servers/{server['id']}/operations")["operations"]
    error = refused(client, "POST", f"/servers/{server['id']}/action", {action: arguments})
    assert error.status == 400 and error.code == "berth.undefined_code", error
    assert client.get(f"/servers/{server['id']}/operations")["operations"] == before
    deleted(client, server["id"])


def test_the_flags_nova_takes_are_taken(cloud):
    client = cloud.client()
    server = build(client, "flags-taken")
    live = act(client, server["id"], "os-migrateLive", {"host": None, "block_migration": "auto"})
    assert live["state"] == "done" and live["kind"] == "live_migrate", live
    live = act(client, server["id"], "os-migrateLive", {"host": None, "block_migration": "False"})
    assert live["state"] == "done", live
    # The body is taken; the evacuation is refused for the host being up, not for its body.
    error = refused(client, "POST", f"/servers/{server['id']}/action", {"evacuate": {"onSharedStorage": "true"}})
    assert error.status == 409 and error.code == "berth.host.up", error
    deleted(client, server["id"])
