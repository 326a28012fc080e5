"""``ServiceCalls.host_of``, the lookup behind every delete, move and lifecycle operation: it answers
the host whose tree holds an instance, reading that instance's allocations and, once per provider,
the provider's tree; never the list of every compute node. And a build in flight (the scheduler
has claimed, the host's agent not yet) keeps its allocations through the host's own heal."""

from __future__ import annotations

import uuid

import pytest
from conductorhelpers import PLAIN, assert_books_agree, assert_nothing_left, claims_of, server
from httphelpers import RecordingHttp

from berth.clients.placement import PlacementClient
from berth.conductor.journal import DONE
from berth.conductor.service import ServiceCalls

pytestmark = pytest.mark.slow


@pytest.fixture
def recorded(placement_service):
    placement = PlacementClient(placement_service.url)
    session = placement.http = RecordingHttp(placement.url, placement.headers)
    return ServiceCalls(placement), session


def _write(placement, consumer, allocations):
    state = placement.consumer(consumer)
    placement.write_consumers(
        {
            consumer: {
                "allocations": allocations,
                "generation": state.generation,
                "project_id": "project",
                "user_id": "user",
                "consumer_type": "INSTANCE",
            }
        }
    )


def test_the_host_of_a_server_costs_its_allocations_and_each_new_provider_once(
    conductors, placement, clients, instance_uuid, recorded
):
    calls, session = recorded
    conductor = conductors()
    operation = conductor.build(server(instance_uuid))
    host = operation.selections["host"]
    providers = set(placement.consumer(instance_uuid).allocations)

    assert calls.host_of(instance_uuid) == host
    assert session.sent[0] == ("GET", f"/allocations/{instance_uuid}")
    trees = session.sent[1:]
    assert 1 <= len(trees) <= len(providers)
    assert all(method == "GET" and path.startswith("/resource_providers?in_tree=") for method, path in trees)

    session.sent.clear()
    assert calls.host_of(instance_uuid) == host
    assert session.sent == [("GET", f"/allocations/{instance_uuid}")]

    # Another server on the same host: its host is known from the first one's providers.
    other = str(uuid.uuid4())
    _write(placement, other, {placement.find_provider(host)["uuid"]: {"VCPU": 1}})
    session.sent.clear()
    assert calls.host_of(other) == host
    assert session.sent == [("GET", f"/allocations/{other}")]
    _write(placement, other, {})
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


def test_nothing_held_or_held_only_on_a_sharing_provider_is_nobodys_host(placement, recorded):
    calls, session = recorded
    assert calls.host_of(str(uuid.uuid4())) is None
    assert len(session.sent) == 1

    pool, consumer = str(uuid.uuid4()), str(uuid.uuid4())
    placement.create_provider(f"pool-{pool[:8]}", pool)
    generation, _ = placement.get_inventories(pool)
    placement.set_inventories(pool, generation, {"DISK_GB": {"total": 100}})
    _write(placement, consumer, {pool: {"DISK_GB": 10}})
    try:
        assert calls.host_of(consumer) is None
        # Made a compute node since (as a host registering is, traits last): found, not remembered as nobody's.
        generation, _ = placement.get_traits(pool)
        placement.set_traits(pool, generation, ["COMPUTE_NODE"])
        assert calls.host_of(consumer) == f"pool-{pool[:8]}"
    finally:
        _write(placement, consumer, {})
        placement.delete_provider(pool)


def test_a_build_in_flight_keeps_its_allocations_through_its_hosts_heal(conductors, placement, clients, instance_uuid):
    """Between the scheduler's claim (under the build's lease) and the agent's, the host heals: the
    allocations it has no claim for are the build's, and stay."""
    seen = {}

    def heal_before_the_claim(operation, step):
        if step == "claim" and not seen:
            host = operation.selections["destinations"][int(operation.selections["index"])]["host"]
            before = placement.consumer(operation.instance_uuid).allocations
            report = clients[host].audit(heal=True)
            seen.update(host=host, before=before, after=placement.consumer(operation.instance_uuid).allocations)
            seen["kept"] = [f for f in report["findings"] if f.get("consumer_uuid") == operation.instance_uuid]

    conductor = conductors(hook=heal_before_the_claim)
    operation = conductor.build(server(instance_uuid, PLAIN))
    assert operation.state == DONE and operation.attempts == []
    assert seen["before"] and seen["after"] == seen["before"]
    assert [(f["kind"], f.get("healed")) for f in seen["kept"]] == [("allocations_without_claim", None)]
    assert list(claims_of(clients, instance_uuid)) == [seen["host"]] == [operation.selections["host"]]
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


def test_a_server_on_a_compute_node_learned_from_the_list_costs_its_allocations_alone(
    conductors, placement, clients, instance_uuid, recorded
):
    """The conductors read every compute node for the scheduler now and then (host_books); told
    them, the lookup of a server on one of them makes no read of its tree."""
    calls, session = recorded
    conductor = conductors()
    host = conductor.build(server(instance_uuid, PLAIN)).selections["host"]
    calls.learn_hosts({placement.find_provider(host)["uuid"]: host})
    assert calls.host_of(instance_uuid) == host
    assert session.sent == [("GET", f"/allocations/{instance_uuid}")]
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)
