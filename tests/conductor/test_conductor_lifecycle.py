"""Soft delete and restore, shelve, shelve offload and unshelve through the conductor: the claims
take the states the agents give them, the allocations stay or go accordingly, and the books agree."""

from __future__ import annotations

import pytest
from conductorhelpers import PLAIN, assert_books_agree, assert_nothing_left, claims_of, guests_of, server

from berth.clients.errors import ClaimError
from berth.conductor.errors import ConductorError
from berth.conductor.journal import DONE, FAILED

pytestmark = pytest.mark.slow


def states(clients, instance_uuid):
    return {host: [c.state for c in claims] for host, claims in claims_of(clients, instance_uuid).items()}


def test_soft_delete_keeps_the_claim_and_restore_brings_it_back(conductors, placement, clients, instance_uuid):
    conductor = conductors()
    built = conductor.build(server(instance_uuid, PLAIN))
    host = built.selections["host"]
    before = placement.consumer(instance_uuid).allocations
    assert conductor.soft_delete(instance_uuid).state == DONE
    assert states(clients, instance_uuid) == {host: ["soft_deleted"]}
    assert placement.consumer(instance_uuid).allocations == before  # still counted
    assert conductor.restore(instance_uuid).state == DONE
    assert states(clients, instance_uuid) == {host: ["active"]}
    assert placement.consumer(instance_uuid).allocations == before
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


def test_shelve_then_unshelve_on_the_same_host(conductors, placement, clients, instance_uuid):
    conductor = conductors()
    built = conductor.build(server(instance_uuid, PLAIN))
    host = built.selections["host"]
    before = placement.consumer(instance_uuid).allocations
    conductor.shelve(instance_uuid)
    assert states(clients, instance_uuid) == {host: ["shelved"]}
    unshelved = conductor.unshelve(server(instance_uuid, PLAIN))
    assert unshelved.state == DONE and unshelved.selections["host"] == host
    assert unshelved.selections["claim_id"] == built.selections["claim_id"]
    assert states(clients, instance_uuid) == {host: ["active"]}
    assert placement.consumer(instance_uuid).allocations == before
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


def test_shelve_offload_frees_everything_and_unshelve_builds_anew(conductors, placement, clients, instance_uuid):
    conductor = conductors()
    conductor.build(server(instance_uuid, PLAIN))
    conductor.shelve(instance_uuid)
    offloaded = conductor.shelve_offload(instance_uuid)
    assert offloaded.state == DONE and offloaded.step == "offload"
    assert guests_of(clients, instance_uuid) == {}
    assert_nothing_left(placement, clients, instance_uuid)

    unshelved = conductor.unshelve(server(instance_uuid, PLAIN))
    assert unshelved.kind == "unshelve" and unshelved.state == DONE and unshelved.step == "confirm"
    host = unshelved.selections["host"]
    (claim,) = claims_of(clients, instance_uuid)[host]
    assert claim.state == "active"
    assert placement.consumer(instance_uuid).allocations == claim.allocations
    assert guests_of(clients, instance_uuid) == {host: claim.claim_id}
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


def test_a_refused_step_fails_and_changes_nothing(conductors, placement, clients, instance_uuid):
    conductor = conductors()
    built = conductor.build(server(instance_uuid, PLAIN))
    conductor.shelve(instance_uuid)
    with pytest.raises(ClaimError):
        conductor.soft_delete(instance_uuid)  # a shelved instance is not soft deleted
    (operation,) = [o for o in conductor.journal.for_instance(instance_uuid) if o.kind == "soft_delete"]
    assert operation.state == FAILED and "shelved" in operation.error
    assert states(clients, instance_uuid) == {built.selections["host"]: ["shelved"]}
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


class Killed(BaseException):
    """The conductor's process died here."""


def test_a_killed_shelve_offload_is_finished(conductors, placement, clients, instance_uuid):
    conductor = conductors()
    conductor.build(server(instance_uuid, PLAIN))
    conductor.shelve(instance_uuid)

    def kill(operation, step):
        if step == "offload":
            raise Killed(step)

    with pytest.raises(Killed):
        conductors(hook=kill).shelve_offload(instance_uuid)
    assert guests_of(clients, instance_uuid) == {}  # destroyed before the kill
    assert placement.consumer(instance_uuid).allocations  # not yet freed
    (resumed,) = conductors(dead_after=0).resume()
    assert (resumed.kind, resumed.state, resumed.step) == ("shelve_offload", DONE, "offload")
    assert_nothing_left(placement, clients, instance_uuid)


def test_rebuild_starts_a_new_guest_in_the_same_claim(conductors, placement, clients, instance_uuid):
    conductor = conductors()
    built = conductor.build(server(instance_uuid, PLAIN))
    host, claim_id = built.selections["host"], built.selections["claim_id"]
    before = placement.consumer(instance_uuid).allocations
    rebuilt = conductor.rebuild(instance_uuid)
    assert (rebuilt.state, rebuilt.step) == (DONE, "spawn")
    assert guests_of(clients, instance_uuid) == {host: claim_id}
    assert states(clients, instance_uuid) == {host: ["active"]}
    assert placement.consumer(instance_uuid).allocations == before
    conductor.shelve(instance_uuid)
    with pytest.raises(ConductorError, match="no active claim"):
        conductor.rebuild(instance_uuid)
    assert guests_of(clients, instance_uuid) == {host: claim_id}  # the shelved guest is kept
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)
