"""``berth server|flavor|host|operation`` as a hurried operator types them, in-process against live
conductors (a cloud of this module's own): an empty name or id said to be one, not a traceback; the
servers of a multi-create named as they are; a host evacuated with ``--wait`` for scripts, whether it
had servers or none."""

from __future__ import annotations

import re
import time

import pytest
from clihelpers import UUID, as_json, berth_against, cleaned_after_evacuation, create
from servicehelpers import ended, ensure_flavors, wait_for

from berth.conductor.control.host_books import DOWN_FRESH_SECONDS


@pytest.fixture(autouse=True)
def flavors(cloud):
    ensure_flavors(cloud.client())


@pytest.fixture
def berth(cloud):
    return berth_against(cloud)


def _every_host_up(berth) -> None:
    """Every host up as the conductors show it, and long enough that each conductor's own view of the
    hosts that are down has it up too (a test before may have stopped and started an agent)."""
    wait_for(
        lambda: all(h["state"] == "up" for h in as_json(berth("host", "list", "-f", "json"))["hosts"]),
        what="every host up",
    )
    time.sleep(DOWN_FRESH_SECONDS)


@pytest.mark.parametrize(
    "command",
    [
        ("host", "show"),
        ("host", "disable"),
        ("host", "evacuate"),
        ("flavor", "show"),
        ("flavor", "delete"),
        ("flavor", "set", "--property", "a=b"),
        ("flavor", "unset", "--property", "a"),
        ("operation", "show"),
    ],
)
def test_an_empty_name_or_id_is_refused_as_such(berth, command):
    # An empty one named the whole collection (`GET /hosts/` is the list): a KeyError's traceback.
    refused = berth(*command, "", expect=2)
    assert "not an empty one" in refused.output and "Traceback" not in refused.output, refused.output
    assert isinstance(refused.exception, SystemExit), refused.exception


def test_the_servers_of_a_multi_create_are_named_as_they_are(berth, cloud):
    started = berth("server", "create", "cli-many", "--flavor", "small", "--count", "2").stdout
    found = re.findall(rf"server ({UUID}) \(([^)]*)\) is building: operation ({UUID})", started)
    assert len(found) == 2, started
    for server_id, name, _ in found:
        assert as_json(berth("server", "show", server_id, "-f", "json"))["server"]["name"] == name
    assert sorted(name for _, name, _ in found) == ["cli-many-1", "cli-many-2"], started
    for server_id, _, operation_id in found:
        assert ended(cloud.client(), operation_id)["state"] == "done"
        berth("server", "delete", server_id, "--wait")


def test_a_multi_create_of_which_one_fits_is_still_several_servers(berth, cloud):
    """Of three servers of 3 VCPUs in the zone of one host of 4, one is built: a multi-create all the
    same, its server named NAME-N, and listed as servers for scripts, as the API answers."""
    _every_host_up(berth)
    berth("flavor", "create", "cli-wide", "--vcpus", "3", "--ram", "512", "--disk", "1")
    asked = ("--flavor", "cli-wide", "--count", "3", "--min-count", "1", "--availability-zone", "zone-b")
    try:
        waited = as_json(berth("server", "create", "cli-one", *asked, "--wait", "-f", "json"))
        assert list(waited) == ["servers"], waited
        [built] = waited["servers"]
        assert re.fullmatch(r"cli-one-[123]", built["name"]) and built["status"] == "ACTIVE", built
        berth("server", "delete", built["id"], "--wait")

        started = berth("server", "create", "cli-one", *asked).stdout
        [(server_id, name, operation_id)] = re.findall(
            rf"server ({UUID}) \(([^)]*)\) is building: operation ({UUID})", started
        )
        assert as_json(berth("server", "show", server_id, "-f", "json"))["server"]["name"] == name, started
        assert re.fullmatch(r"cli-one-[123]", name), started
        assert ended(cloud.client(), operation_id)["state"] == "done"
        berth("server", "delete", server_id, "--wait")
    finally:
        berth("flavor", "delete", "cli-wide")


def test_a_down_host_is_evacuated_with_wait_for_scripts_with_or_without_servers(berth, cloud):
    _every_host_up(berth)
    server = create(berth, "cli-evacuated")
    host = server["OS-EXT-SRV-ATTR:host"]
    agent = cloud.agents[host]
    agent.stop(sig=9)
    try:
        wait_for(lambda: as_json(berth("host", "show", host, "-f", "json"))["host"]["state"] == "down", what="down")
        evacuated = as_json(berth("host", "evacuate", host, "--wait", "-f", "json"))
        # As the API answers (and as without --wait): the operations, as they ended, and the servers left.
        assert sorted(evacuated) == ["left", "operations"] and evacuated["left"] == [], evacuated
        assert {o["server_id"] for o in evacuated["operations"]} >= {server["id"]}, evacuated
        assert {(o["kind"], o["state"]) for o in evacuated["operations"]} == {("evacuate", "done")}, evacuated
        # Nothing left to evacuate: no operation, not an IndexError's traceback.
        nothing = berth("host", "evacuate", host, "--wait", "-f", "json")
        assert as_json(nothing) == {"operations": [], "left": []}, nothing.output
        assert f"no server of {host} to evacuate" in berth("host", "evacuate", host, "--wait").stdout
    finally:
        agent.start()
    cleaned_after_evacuation(berth, host, server["id"])
