"""Unshelve into an availability zone, and a move that names its host, as Nova's callers ask them,
against live conductors: ``{"unshelve": {"availability_zone": "zone-b"}}`` (Nova's microversion 2.77;
``null`` unpins the server, 2.91) was a 400, and a host named in a migration, live migration or
evacuation was refused as "'host-1' is not of type 'null'", which did not say what to do."""

from __future__ import annotations

import pytest
from cloudhelpers import HOSTS
from servicehelpers import act, build, ended, ensure_flavors, refused

from berth.clients.conductor import ConductorClient

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def flavors(cloud):
    ensure_flavors(cloud.client())


def offloaded(client: ConductorClient, server_id: str) -> None:
    assert act(client, server_id, "shelve")["state"] == "done"
    assert act(client, server_id, "shelveOffload")["state"] == "done"


def deleted(client: ConductorClient, server_id: str) -> None:
    assert ended(client, client.request("DELETE", f"/servers/{server_id}")["operation"]["id"])["state"] == "done"


def test_an_offloaded_server_is_unshelved_into_the_zone_asked_and_stays_in_it(cloud):
    client = cloud.client()
    [only_in_b] = [name for name, zone in HOSTS.items() if zone == "zone-b"]
    server = build(client, "unshelved-elsewhere", availability_zone="zone-a")
    offloaded(client, server["id"])
    unshelved = act(client, server["id"], "unshelve", {"availability_zone": "zone-b"})
    assert unshelved["state"] == "done", unshelved
    shown = client.get(f"/servers/{server['id']}")["server"]
    assert shown["status"] == "ACTIVE" and shown["OS-EXT-SRV-ATTR:host"] == only_in_b, shown
    assert shown["OS-EXT-AZ:availability_zone"] == "zone-b"
    # The server keeps the zone, as Nova's request spec does: a migration finds no other host in it.
    migrated = act(client, server["id"], "migrate")
    assert migrated["state"] != "done", migrated
    assert client.get(f"/servers/{server['id']}")["server"]["OS-EXT-SRV-ATTR:host"] == only_in_b
    # Unshelved with a null zone (Nova's 2.91), it is in none: a migration leaves the zone.
    offloaded(client, server["id"])
    assert act(client, server["id"], "unshelve", {"availability_zone": None})["state"] == "done"
    if client.get(f"/servers/{server['id']}")["server"]["OS-EXT-SRV-ATTR:host"] == only_in_b:
        moved = act(client, server["id"], "migrate")
        assert moved["state"] == "done", moved
        assert act(client, server["id"], "confirmResize")["state"] == "done"
    assert client.get(f"/servers/{server['id']}")["server"]["OS-EXT-AZ:availability_zone"] == "zone-a"
    deleted(client, server["id"])


def test_an_unshelve_into_a_zone_is_refused_for_a_server_on_its_host_or_a_zone_no_host_is_in(cloud):
    """As Nova refuses them: 409 for a server that is SHELVED (only an offloaded one is placed anew),
    400 for an unknown zone; nothing is started."""
    client = cloud.client()
    server = build(client, "unshelved-nowhere")
    assert act(client, server["id"], "shelve")["state"] == "done"
    before = client.get(f"/servers/{server['id']}/operations")["operations"]
    for zone in ("zone-b", "zone-z"):  # the state first, as Nova checks it, then the zone
        error = refused(client, "POST", f"/servers/{server['id']}/action", {"unshelve": {"availability_zone": zone}})
        assert error.status == 409 and error.code == "berth.server.invalid_state", error
    assert client.get(f"/servers/{server['id']}/operations")["operations"] == before
    assert act(client, server["id"], "shelveOffload")["state"] == "done"
    before = client.get(f"/servers/{server['id']}/operations")["operations"]
    error = refused(client, "POST", f"/servers/{server['id']}/action", {"unshelve": {"availability_zone": "zone-z"}})
    assert error.status == 400 and error.code == "berth.availability_zone.not_found", error
    assert client.get(f"/servers/{server['id']}/operations")["operations"] == before
    assert client.get(f"/servers/{server['id']}")["server"]["status"] == "SHELVED_OFFLOADED"
    deleted(client, server["id"])


@pytest.mark.parametrize(
    "body",
    [
        {"migrate": {"host": "host-1"}},
        {"os-migrateLive": {"host": "host-1", "block_migration": "auto"}},
        {"evacuate": {"host": "host-1"}},
    ],
)
def test_a_named_host_is_refused_saying_what_to_do(cloud, body):
    client = cloud.client()
    server = build(client, "named-host")
    before = client.get(f"/servers/{server['id']}/operations")["operations"]
    error = refused(client, "POST", f"/servers/{server['id']}/action", body)
    assert error.status == 400 and error.code == "berth.undefined_code", error
    assert "scheduler chooses the host" in str(error) and "leave out 'host' or give null" in str(error), error
    assert "not of type" not in str(error), error
    assert client.get(f"/servers/{server['id']}/operations")["operations"] == before
    deleted(client, server["id"])
