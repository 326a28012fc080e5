"""The builds of a multi-create: the scheduler placed the gang under leases, each build carries its
destination and records it in its ``schedule`` step. A build killed before its guest ran is undone
by the conductor that resumes it, one killed after is finished; a host that refuses the build makes
it select again (a gang's member has no alternates)."""

from __future__ import annotations

import uuid

import pytest
from conductorhelpers import assert_books_agree, assert_nothing_left, claims_of, lease_of, server
from test_conductor_resume import Killed, kill_at, left_running

from berth.conductor.journal import DONE, ROLLED_BACK
from berth.conductor.operations import build as build_op
from berth.scheduler.service import Service

pytestmark = pytest.mark.slow


@pytest.fixture
def gang(conductors, placement):
    """The first of a gang of two placed by a conductor's scheduler under leases, as a multi-create
    places it (the second is given back at once: the agents' books would not hold it); what the test
    leaves of it is released after."""
    conductor = conductors()
    instances = [str(uuid.uuid4()) for _ in range(2)]
    spec = server(instances[0]).spec(conductor.runner.scheduler_config)
    selections = conductor.runner.selector.select_destinations(
        spec, 2, 0, instance_uuids=instances, lease_seconds=conductor.runner.config.lease_seconds
    )
    assert conductor.runner.selector.last_path == "pick"
    assert all(lease_of(placement, instance) is not None for instance in instances)
    service = Service(placement)
    service.release_lease(instances[1])
    yield selections[0]
    for instance in instances:
        service.release_lease(instance)
        service.release(instance)


@pytest.mark.parametrize("step", ["lease", "schedule", "claim", "spawn"])
def test_a_gang_build_killed_before_its_guest_ran_is_undone_by_its_successor(
    conductors, placement, clients, gang, step
):
    selection = gang
    instance = selection.instance_uuid
    with pytest.raises(Killed):
        build_op.build(conductors(hook=kill_at(step)).runner, server(instance), destination=selection.destination)
    dead = left_running(conductors, instance, "build")
    assert dead.request["destination"]["host"] == selection.host

    (resumed,) = conductors(dead_after=0).resume()
    assert (resumed.id, resumed.state) == (dead.id, ROLLED_BACK)
    assert_nothing_left(placement, clients, instance)


def test_a_gang_build_killed_after_its_guest_ran_is_finished_on_its_host(conductors, placement, clients, gang):
    selection = gang
    instance = selection.instance_uuid
    with pytest.raises(Killed):
        build_op.build(conductors(hook=kill_at("confirm")).runner, server(instance), destination=selection.destination)
    (resumed,) = conductors(dead_after=0).resume()
    assert (resumed.state, resumed.selections["host"]) == (DONE, selection.host)
    assert set(claims_of(clients, instance)) == {selection.host}
    assert lease_of(placement, instance) is None
    assert_books_agree(placement, clients)
    conductors().delete(instance)
    assert_nothing_left(placement, clients, instance)


def test_a_gang_build_whose_host_refuses_selects_again(conductors, placement, clients, gang):
    selection = gang
    instance = selection.instance_uuid
    # The placed host's agent is unknown to this conductor: the host refuses the build.
    others = {name: client for name, client in clients.items() if name != selection.host}
    operation = build_op.build(
        conductors(agents=others, max_attempts=3).runner, server(instance), destination=selection.destination
    )
    assert operation.state == DONE
    assert operation.attempts[0]["host"] == selection.host
    host = operation.selections["host"]
    assert host != selection.host and host in others
    assert "reschedule" in operation.selections["steps_done"]
    assert set(claims_of(clients, instance)) == {host}
    assert lease_of(placement, instance) is None
    conductors().delete(instance, host)
    assert_nothing_left(placement, clients, instance)
