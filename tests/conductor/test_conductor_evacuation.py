"""Evacuation through the conductor: the instance of a host that is down is rebuilt elsewhere, its
allocations on the dead host stay counted (under the migration) until the host is back and cleaned
up, and then nothing of it remains there."""

from __future__ import annotations

import pytest
from conductorhelpers import PLAIN, assert_books_agree, assert_nothing_left, claims_of, guests_of, server

from berth.conductor.control.host_books import set_disabled
from berth.conductor.errors import NoValidHost
from berth.conductor.journal import DONE, FAILED

pytestmark = pytest.mark.slow


def test_evacuate_then_clean_up_the_source(conductors, placement, clients, cloud, instance_uuid):
    conductor = conductors()
    built = conductor.build(server(instance_uuid, PLAIN))
    source = built.selections["host"]
    before = placement.consumer(instance_uuid).allocations
    cloud[source].stop()
    try:
        evacuated = conductor.evacuate(server(instance_uuid, PLAIN), source)
        assert evacuated.state == DONE and evacuated.step == "confirm_dest"
        dest, migration = evacuated.selections["dest"], evacuated.request["migration_uuid"]
        assert dest != source
        (claim,) = clients[dest].claims_for_instance(instance_uuid)
        assert claim.state == "active"
        assert placement.consumer(instance_uuid).allocations == claim.allocations
        (guest,) = [g for g in clients[dest].guests() if g["uuid"] == instance_uuid]
        assert guest["claim_id"] == claim.claim_id
        # What the instance held on the dead host stays counted, as the migration's.
        assert placement.consumer(migration).allocations == before
    finally:
        cloud[source].start()
        clients[source] = cloud[source].client

    cleaned = conductor.clean_up_evacuated(evacuated.id)
    assert cleaned.state == DONE
    assert list(claims_of(clients, instance_uuid)) == [dest]
    assert guests_of(clients, instance_uuid) == {dest: claim.claim_id}
    assert_nothing_left(placement, clients, migration)
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


def test_an_evacuation_offered_only_its_dead_source_fails_undone_without_asking_it(
    conductors, placement, clients, cloud, instance_uuid
):
    # The source is passed over as a destination; the undo must not ask it (it is down) either, or the
    # operation is left running, failing at every resume until the host is back.
    conductor = conductors(max_attempts=1)
    built = conductor.build(server(instance_uuid, PLAIN))
    source = built.selections["host"]
    before = placement.consumer(instance_uuid).allocations
    others = [host for host in cloud if host != source]
    for host in others:
        set_disabled(placement, host, True)
    cloud[source].stop()
    try:
        with pytest.raises(NoValidHost):
            conductor.evacuate(server(instance_uuid, PLAIN), source)
        (operation,) = conductor.journal.find(instance_uuid=instance_uuid, kind="evacuate")
        assert operation.state == FAILED
        assert placement.consumer(instance_uuid).allocations == before
        assert placement.consumer(str(operation.request["migration_uuid"])).allocations == {}
    finally:
        for host in others:
            set_disabled(placement, host, False)
        cloud[source].start()
        clients[source] = cloud[source].client
    assert list(claims_of(clients, instance_uuid)) == [source]
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


class Killed(BaseException):
    """The conductor's process died here."""


@pytest.mark.parametrize(("step", "outcome"), [("spawn_dest", "rolled_back"), ("confirm_dest", DONE)])
def test_a_killed_evacuation_is_resumed(conductors, placement, clients, cloud, instance_uuid, step, outcome):
    built = conductors().build(server(instance_uuid, PLAIN))
    source = built.selections["host"]
    before = placement.consumer(instance_uuid).allocations

    def kill(operation, reached):
        if reached == step:
            raise Killed(step)

    cloud[source].stop()
    try:
        with pytest.raises(Killed):
            conductors(hook=kill).evacuate(server(instance_uuid, PLAIN), source)
        successor = conductors(dead_after=0)
        (resumed,) = successor.resume()
        assert resumed.state == outcome
        dest, migration = resumed.selections["dest"], resumed.request["migration_uuid"]
        if outcome == DONE:
            (claim,) = clients[dest].claims_for_instance(instance_uuid)
            assert claim.state == "active" and placement.consumer(instance_uuid).allocations == claim.allocations
            assert placement.consumer(migration).allocations == before
        else:
            # Undone: the instance holds its allocations on the dead host again, the destination nothing.
            assert clients[dest].claims_for_instance(instance_uuid) == []
            assert instance_uuid not in {g["uuid"] for g in clients[dest].guests()}
            assert placement.consumer(instance_uuid).allocations == before
            assert placement.consumer(migration).allocations == {}
    finally:
        cloud[source].start()
        clients[source] = cloud[source].client
    if outcome == DONE:
        successor.clean_up_evacuated(resumed.id)
        assert list(claims_of(clients, instance_uuid)) == [dest]
    else:
        assert list(claims_of(clients, instance_uuid)) == [source]
    assert_books_agree(placement, clients)
    successor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid, migration)
    assert guests_of(clients, instance_uuid) == {}
