"""Preemption through the conductors: a build of a flavor above priority 0 takes the room of
servers of lower priority when nothing else fits; the victims' servers end as their flavor says
(deleted, or offloaded), their hosts' claims go first, and a preemption the service recorded whose
server still runs is ended by the housekeeping. Real service, real agent processes."""

from __future__ import annotations

import time
import uuid

import pytest
from conductorhelpers import assert_books_agree, claims_of, ended, guests_of

from berth.conductor.control.plane import ControlPlane, ControlSettings, Who
from berth.conductor.journal import DONE, FAILED
from berth.conductor.records import server_states
from berth.conductor.records.servers import ServerFilter
from berth.conductor.runner import ConductorConfig
from berth.domain.errors import BadRequest, NotFound
from berth.scheduler.settings import SelectionSettings

WHO = Who("project", "user")
# Each fills one host of the test cloud (4 VCPUs each).
WHOLE_HOST = {"vcpus": 4, "ram": 1024, "disk": 1}


@pytest.fixture
def plane(placement, cloud, tmp_path):
    made = ControlPlane(
        f"sqlite:///{tmp_path / 'conductor.sqlite'}",
        placement,
        selection=SelectionSettings(enabled_filters=[]),
        conductor_config=ConductorConfig(heartbeat_interval=0.2),
        settings=ControlSettings(housekeeping_interval=0.3),
    )
    for index, (name, agent) in enumerate(sorted(cloud.items())):
        made.register_host(name, agent.url, f"zone-{index % 2}", agent.token, "agent-user", admin=False)
    made.flavors.create({"name": "low", **WHOLE_HOST})
    offload = {"berth:preemption_action": "shelve_offload"}
    made.flavors.create({"name": "low.offload", **WHOLE_HOST, "extra_specs": offload})
    made.flavors.create({"name": "high", **WHOLE_HOST, "extra_specs": {"berth:priority": "10"}})
    made.start()
    yield made
    for row in made.servers.all(ServerFilter()):
        ended(made, made.delete(str(row["id"])).id)
    made.close()


def built(plane, flavor, name):
    [build] = plane.create_servers(WHO, name=name, flavor_ref=flavor)
    return ended(plane, build.id)


def fill(plane, flavor, hosts=3):
    """One server of ``flavor`` on each host; their ids."""
    made = [built(plane, flavor, f"{flavor}-{n}") for n in range(hosts)]
    assert [op.state for op in made] == [DONE] * hosts, [(op.error, op.attempts) for op in made]
    return [op.instance_uuid for op in made]


def until(check, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError("never came true")


@pytest.mark.parametrize(
    ("flavor", "status"), [("low", server_states.DELETED), ("low.offload", server_states.SHELVED_OFFLOADED)]
)
def test_a_high_priority_build_ends_a_victim_as_its_flavor_says(plane, placement, clients, flavor, status):
    low = fill(plane, flavor)
    hosts_before = {plane.servers.get(s)["host"]: s for s in low}

    build = built(plane, "high", "urgent")

    assert build.state == DONE, build.error
    new = plane.servers.get(build.instance_uuid)
    assert new["status"] == server_states.ACTIVE
    victim = hosts_before[new["host"]]
    assert [v["consumer_uuid"] for v in build.selections["preempted"]] == [victim]
    # Ended by the build, or (when the housekeeping, reading the service's record, took it first) by
    # the housekeeping's operation, which may still be finishing.
    row = until(lambda: (r := plane.servers.get(victim, deleted=True))["status"] == status and r)
    assert (row["status"], row["host"]) == (status, None)
    assert row["fault"] == f"preempted by {build.instance_uuid}"
    assert placement.consumer(victim).allocations == {}
    assert claims_of(clients, victim) == {} and guests_of(clients, victim) == {}
    assert set(claims_of(clients, build.instance_uuid)) == {new["host"]}
    for other in set(low) - {victim}:  # the others are untouched
        assert plane.servers.get(other)["status"] == server_states.ACTIVE
        assert placement.consumer(other).allocations
    [record] = placement.get(f"/berth/preemptions?preempted_by={build.instance_uuid}")["preemptions"]
    assert record["consumer_uuid"] == victim
    assert_books_agree(placement, clients)


def test_a_multi_create_of_high_priority_preempts_for_the_whole_gang(plane, placement, clients):
    low = fill(plane, "low")

    builds = [ended(plane, op.id) for op in plane.create_servers(WHO, name="gang", flavor_ref="high", count=2)]

    assert [op.state for op in builds] == [DONE, DONE], [(op.error, op.attempts) for op in builds]
    hosts = {plane.servers.get(op.instance_uuid)["host"] for op in builds}
    assert len(hosts) == 2
    victims = until(
        lambda: (
            (ended := [s for s in low if plane.servers.get(s, deleted=True)["status"] == server_states.DELETED])
            and len(ended) == 2
            and ended
        )
    )
    for victim in victims:
        assert placement.consumer(victim).allocations == {}
        assert claims_of(clients, victim) == {} and guests_of(clients, victim) == {}
        assert plane.servers.get(victim, deleted=True)["fault"].startswith("preempted by ")
    for op in builds:
        assert plane.servers.get(op.instance_uuid)["status"] == server_states.ACTIVE
        assert [v["consumer_uuid"] for v in op.selections["preempted"]] in ([v] for v in victims)
    assert_books_agree(placement, clients)


def test_a_multi_create_that_preemption_cannot_complete_creates_nothing_and_preempts_nobody(plane, placement):
    high = fill(plane, "high", hosts=2)
    low = fill(plane, "low", hosts=1)
    recorded = placement.get("/berth/preemptions")["preemptions"]

    with pytest.raises(Exception, match="None of the 2 servers"):
        plane.create_servers(WHO, name="gang", flavor_ref="high", count=2)

    for server in [*high, *low]:
        assert plane.servers.get(server)["status"] == server_states.ACTIVE
        assert placement.consumer(server).allocations
    assert placement.get("/berth/preemptions")["preemptions"] == recorded


def test_a_build_finds_no_host_when_only_equal_priorities_hold_the_room(plane, placement, clients):
    high = fill(plane, "high")

    build = built(plane, "high", "one-too-many")

    assert build.state == FAILED, build.selections
    assert "No valid host" in build.error
    assert plane.servers.get(build.instance_uuid)["status"] == server_states.ERROR
    for server in high:
        assert plane.servers.get(server)["status"] == server_states.ACTIVE
        assert placement.consumer(server).allocations
    assert placement.get(f"/berth/preemptions?preempted_by={build.instance_uuid}")["preemptions"] == []
    assert_books_agree(placement, clients)


def test_a_preemption_whose_server_still_runs_is_ended_by_the_housekeeping(plane, placement, clients):
    low = fill(plane, "low")
    # Another client's pick preempts one of them; no build of this cloud ends its server.
    other = str(uuid.uuid4())
    answer = placement.request(
        "POST",
        "/berth/pick",
        {
            "query": {"resources": "VCPU:4,MEMORY_MB:1024,DISK_GB:1"},
            "consumer": {"uuid": other, "project_id": "p", "user_id": "u", "consumer_type": "INSTANCE"},
            "priority": 10,
            "preempt": True,
        },
    )
    [victim] = [v["consumer_uuid"] for v in answer["preempted"]]
    assert victim in low

    row = until(lambda: _ended_row(plane, victim))

    assert row["status"] == server_states.DELETED
    assert row["fault"] == f"preempted by {other}"
    assert claims_of(clients, victim) == {} and guests_of(clients, victim) == {}
    placement.request("DELETE", f"/allocations/{other}")
    assert_books_agree(placement, clients)


def test_a_victim_awaiting_its_migrations_confirmation_has_it_confirmed_then_is_ended(plane, placement, clients):
    [server] = fill(plane, "low", hosts=1)
    moved = ended(plane, plane.act(server, "migrate").id)
    assert moved.state == DONE, moved.error
    row = plane.servers.get(server)
    assert row["status"] == server_states.VERIFY_RESIZE
    migration = str(moved.request["migration_uuid"])
    assert placement.consumer(migration).allocations  # the source's side, until confirmed
    # Another client's pick preempts it on its destination.
    other = str(uuid.uuid4())
    answer = placement.request(
        "POST",
        "/berth/pick",
        {
            "query": {
                "resources": "VCPU:4,MEMORY_MB:1024,DISK_GB:1",
                "in_tree": placement.find_provider(row["host"])["uuid"],
            },
            "consumer": {"uuid": other, "project_id": "p", "user_id": "u", "consumer_type": "INSTANCE"},
            "priority": 10,
            "preempt": True,
        },
    )
    assert [v["consumer_uuid"] for v in answer["preempted"]] == [server]

    row = until(lambda: _ended_row(plane, server))

    assert row["fault"] == f"preempted by {other}"
    assert placement.consumer(server).allocations == {} and placement.consumer(migration).allocations == {}
    assert claims_of(clients, server) == {} and guests_of(clients, server) == {}
    confirms = [op for op in plane.journal.find(instance_uuid=server) if op.kind == "confirm_resize"]
    assert [op.state for op in confirms] == [DONE]
    placement.request("DELETE", f"/allocations/{other}")
    assert_books_agree(placement, clients)


def _ended_row(plane, server):
    row = plane.servers.get(server, deleted=True)
    return row if row["status"] == server_states.DELETED else None


def test_the_flavor_api_refuses_a_bad_priority_or_action(plane):
    with pytest.raises(BadRequest, match="berth:priority"):
        plane.flavors.create({"name": "bad", **WHOLE_HOST, "extra_specs": {"berth:priority": "urgent"}})
    with pytest.raises(BadRequest, match="berth:preemption_action"):
        plane.flavors.create({"name": "bad", **WHOLE_HOST, "extra_specs": {"berth:preemption_action": "pause"}})
    with pytest.raises(NotFound):
        plane.flavors.get("bad")
