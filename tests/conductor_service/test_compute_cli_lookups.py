"""``berth operation|server|host|flavor`` in-process against live conductors (a cloud of this module's
own): a deleted server's operations found by its id, deleted servers listed by their status, hosts
disabled and enabled shown with their servers, a flavor that would take another's name refused,
a missing property said as such, and what ``force-delete`` deletes."""

from __future__ import annotations

import re

import pytest
from clihelpers import UUID, as_json, berth_against, create
from servicehelpers import ensure_flavors


@pytest.fixture(autouse=True)
def flavors(cloud):
    ensure_flavors(cloud.client())


@pytest.fixture
def berth(cloud):
    return berth_against(cloud)


def test_a_deleted_servers_operations_are_listed_by_its_id(berth):
    server = create(berth, "cli-gone")
    berth("server", "delete", server["id"], "--wait")
    listed = as_json(berth("operation", "list", "--server", server["id"], "-f", "json"))["operations"]
    assert [(o["kind"], o["state"], o["server_id"]) for o in listed] == [
        ("delete", "done", server["id"]),
        ("build", "done", server["id"]),
    ]
    assert "2 operations" in berth("operation", "list", "--server", server["id"]).stdout
    # A name still resolves among the servers shown, which a deleted one is not.
    named = berth("operation", "list", "--server", "cli-gone", expect=1)
    assert "no server named or with id 'cli-gone'" in named.output
    # An id no server ever had is the conductors' 404.
    unknown = berth("operation", "list", "--server", "00000000-0000-4000-8000-000000000000", expect=1)
    assert "404 berth.server.not_found" in unknown.output


def test_deleted_servers_are_listed_by_their_status(berth):
    server = create(berth, "cli-listed-gone")
    berth("server", "delete", server["id"], "--wait")
    for status in ("deleted", "DELETED"):
        listed = as_json(berth("server", "list", "--status", status, "-f", "json"))["servers"]
        assert server["id"] in {s["id"] for s in listed}, status
        assert {s["status"] for s in listed} == {"DELETED"}, status
    table = berth("server", "list", "--status", "deleted").stdout
    assert server["id"] in table and "DELETED" in table


def test_a_host_disabled_and_enabled_shows_its_servers(berth):
    server = create(berth, "cli-on-host")
    host = server["OS-EXT-SRV-ATTR:host"]
    count = as_json(berth("host", "show", host, "-f", "json"))["host"]["servers"]
    assert count >= 1
    try:
        disabled = berth("host", "disable", host, "--reason", "disk swap").stdout
        assert re.search(rf"│ servers\s+│ {count}\s+│", disabled), disabled
        assert as_json(berth("host", "enable", host, "-f", "json"))["host"]["servers"] == count
        disabled_json = as_json(berth("host", "disable", host, "-f", "json"))["host"]
        assert (disabled_json["status"], disabled_json["servers"]) == ("disabled", count)
    finally:
        enabled = berth("host", "enable", host).stdout
    assert re.search(rf"│ servers\s+│ {count}\s+│", enabled), enabled
    berth("server", "delete", server["id"], "--wait")


def test_force_delete_says_and_does_delete_a_server_in_any_state(berth):
    helped = " ".join(berth("server", "force-delete", "--help").stdout.split())
    assert "in any state" in helped and "softly deleted server for good" not in helped
    active = create(berth, "cli-forced")
    assert active["status"] == "ACTIVE"
    forced = berth("server", "force-delete", active["id"], "--wait")
    assert re.search(rf"delete {UUID} done", forced.output), forced.output
    gone = as_json(berth("server", "list", "--status", "deleted", "-f", "json"))["servers"]
    assert active["id"] in {s["id"] for s in gone}


def test_a_flavor_taking_another_flavors_name_as_its_id_is_refused(berth):
    refused = berth("flavor", "create", "f8", "--vcpus", "1", "--ram", "64", "--id", "small", expect=1)
    assert "409 berth.flavor.duplicate" in refused.output and "A flavor named 'small' exists already" in refused.output
    assert as_json(berth("flavor", "show", "small", "-f", "json"))["flavor"]["name"] == "small"
    again = berth("flavor", "create", "small", "--vcpus", "1", "--ram", "64", expect=1)
    assert "A flavor named 'small' exists already" in again.output and not re.search(UUID, again.output)


def test_a_missing_property_is_said_to_be_one(berth):
    missing = berth("flavor", "unset", "small", "--property", "hw:nope", expect=1)
    assert "404 berth.flavor.extra_spec_not_found" in missing.output, missing.output
    assert "has no extra spec 'hw:nope'" in missing.output and "`berth flavor show FLAVOR`" in missing.output
