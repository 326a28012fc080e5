"""Resize and cold migration through the conductor: confirm and revert leave exactly the right
allocations (the new flavor's, or the old ones back), and the agents' books agree with the service."""

from __future__ import annotations

from collections import Counter

import pytest
from conductorhelpers import (
    BIGGER,
    PLAIN,
    FirstAnswerLost,
    FirstClaimUnanswered,
    assert_books_agree,
    assert_nothing_left,
    claims_of,
    guests_of,
    only_host_enabled,
    server,
)

from berth.clients.http import NotConnected, TransportError
from berth.conductor.errors import ConductorError, NoValidHost, ServerBusy
from berth.conductor.journal import DONE, FAILED, ROLLED_BACK, RUNNING
from berth.conductor.operations.moves import REVERT
from berth.conductor.operations.moving import CLEANUP, SOURCE_NEVER_REACHED

pytestmark = pytest.mark.slow


def totals(allocations):
    """Amounts per class over every provider."""
    summed = Counter()
    for resources in allocations.values():
        summed.update(resources)
    return dict(summed)


def test_resize_then_confirm_keeps_the_new_flavor_only(conductors, placement, clients, instance_uuid):
    conductor = conductors()
    built = conductor.build(server(instance_uuid, PLAIN))
    moved = conductor.resize(server(instance_uuid, PLAIN), BIGGER)
    assert moved.state == DONE and moved.step == "spawn_dest"
    migration = moved.request["migration_uuid"]
    assert moved.request["source"] == built.selections["host"]
    # In flight: the migration holds the old flavor's, the instance the new flavor's.
    assert totals(placement.consumer(migration).allocations) == {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
    assert totals(placement.consumer(instance_uuid).allocations) == {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 2}
    assert_books_agree(placement, clients)

    confirmed = conductor.confirm_resize(moved.id)
    assert confirmed.state == DONE
    dest = moved.selections["dest"]
    (claim,) = claims_of(clients, instance_uuid)[dest]
    assert claim.state == "active" and claim.flavor.vcpus == 2
    assert list(claims_of(clients, instance_uuid)) == [dest]
    assert guests_of(clients, instance_uuid) == {dest: claim.claim_id}
    assert placement.consumer(instance_uuid).allocations == claim.allocations
    assert placement.consumer(migration).allocations == {}
    assert_books_agree(placement, clients)
    with pytest.raises(ConductorError, match="finished already"):
        conductor.revert_resize(moved.id)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid, migration)


def test_resize_then_revert_gives_the_old_allocations_back(conductors, placement, clients, instance_uuid):
    conductor = conductors()
    built = conductor.build(server(instance_uuid, PLAIN))
    before = placement.consumer(instance_uuid).allocations
    moved = conductor.resize(server(instance_uuid, PLAIN), BIGGER)
    migration = moved.request["migration_uuid"]
    reverted = conductor.revert_resize(moved.id)
    assert reverted.state == DONE
    source = built.selections["host"]
    assert placement.consumer(instance_uuid).allocations == before
    assert placement.consumer(migration).allocations == {}
    (claim,) = claims_of(clients, instance_uuid)[source]
    assert claim.state == "active" and claim.flavor.vcpus == 1 and claim.allocations == before
    assert list(claims_of(clients, instance_uuid)) == [source]
    assert guests_of(clients, instance_uuid) == {source: claim.claim_id}
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid, migration)


def test_cold_migration_keeps_the_flavor(conductors, placement, clients, instance_uuid):
    conductor = conductors()
    conductor.build(server(instance_uuid, PLAIN))
    moved = conductor.migrate(server(instance_uuid, PLAIN))
    assert moved.kind == "migrate" and moved.state == DONE
    assert moved.selections["dest"] != moved.request["source"]
    conductor.confirm_resize(moved.id)
    (claim,) = claims_of(clients, instance_uuid)[moved.selections["dest"]]
    assert totals(claim.allocations) == {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
    assert placement.consumer(instance_uuid).allocations == claim.allocations
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid, moved.request["migration_uuid"])


def test_a_cold_migration_never_stays_on_its_host(conductors, placement, clients, instance_uuid):
    """A resize may stay on its host; a cold migration, every other host disabled, has nowhere to go."""
    conductor = conductors()
    built = conductor.build(server(instance_uuid, PLAIN))
    source = built.selections["host"]
    before = placement.consumer(instance_uuid).allocations
    with only_host_enabled(placement, clients, source), pytest.raises(NoValidHost):
        conductor.migrate(server(instance_uuid, PLAIN))
    assert placement.consumer(instance_uuid).allocations == before
    (claim,) = claims_of(clients, instance_uuid)[source]
    assert claim.claim_id == built.selections["claim_id"] and claim.state == "active"
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


@pytest.mark.parametrize("lost", [True, False], ids=["answer_lost", "never_sent"])
def test_a_destination_that_did_not_answer_its_claim_lets_go_before_the_next_is_tried(
    conductors, placement, clients, instance_uuid, lost
):
    """One whose claim may have landed is asked to revert first; one never reached is not."""
    built = conductors().build(server(instance_uuid, PLAIN))
    first: list[str] = []
    reverted: list[str] = []
    conductor = conductors(
        agents={
            name: FirstClaimUnanswered(client, "resize_claim", "revert_migration", first, lost, reverted)
            for name, client in clients.items()
        }
    )
    moved = conductor.resize(server(instance_uuid, PLAIN), BIGGER)
    (tried,) = first
    dest = moved.selections["dest"]
    assert dest != tried and moved.attempts[0]["host"] == tried
    assert ("did not answer" if lost else "refused") in moved.attempts[0]["reason"]
    assert reverted == ([tried] if lost else [])
    assert tried == built.selections["host"] or tried not in claims_of(clients, instance_uuid)
    assert_books_agree(placement, clients)
    conductor.confirm_resize(moved.id)
    (claim,) = claims_of(clients, instance_uuid)[dest]
    assert list(claims_of(clients, instance_uuid)) == [dest]
    assert placement.consumer(instance_uuid).allocations == claim.allocations
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid, moved.request["migration_uuid"])


def test_a_revert_whose_answer_was_lost_is_finished_by_a_resume_not_failed_with_its_step_done(
    conductors, placement, clients, instance_uuid
):
    """A revert failed at its first step when the agent did it and died as it answered: the server
    stayed awaiting a confirmation with its destination's guest gone (or, resized on its own host,
    its claim already reverted). It is left to a resume, which runs the steps again, each harmless
    to repeat."""
    conductors().build(server(instance_uuid, PLAIN))
    moved = conductors().resize(server(instance_uuid, PLAIN), BIGGER)
    assert moved.state == DONE
    lost: list[str] = []
    flaky = conductors(
        agents={name: FirstAnswerLost(client, "destroy_guest", lost) for name, client in clients.items()}
    )
    with pytest.raises(TransportError):
        flaky.revert_resize(moved.id)
    assert lost
    (reverting,) = [op for op in flaky.journal.for_instance(instance_uuid) if op.kind == REVERT]
    assert flaky.journal.get(reverting.id).state == RUNNING
    conductors().resume()
    assert flaky.journal.get(reverting.id).state == DONE
    (claim,) = [c for claims in claims_of(clients, instance_uuid).values() for c in claims]
    assert claim.state == "active" and claim.flavor.vcpus == PLAIN.vcpus
    assert placement.consumer(instance_uuid).allocations == claim.allocations
    assert_books_agree(placement, clients)
    conductors().delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid, moved.request["migration_uuid"])


def test_a_resize_no_host_can_take_changes_nothing(conductors, placement, clients, instance_uuid):
    from berth.scheduler.request.flavor import Flavor

    conductor = conductors()
    conductor.build(server(instance_uuid, PLAIN))
    before = placement.consumer(instance_uuid).allocations
    with pytest.raises(NoValidHost):
        conductor.resize(server(instance_uuid, PLAIN), Flavor("huge", vcpus=64, memory_mb=512))
    assert placement.consumer(instance_uuid).allocations == before
    (claims,) = claims_of(clients, instance_uuid).values()
    assert [c.state for c in claims] == ["active"]
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)


def test_a_resize_on_the_same_host_confirmed_and_reverted(conductors, placement, clients, instance_uuid):
    """Only the instance's own host has a known agent: the move lands there, the guest restarts in
    the new claim, and revert brings the old claim and a guest in it back."""
    built = conductors().build(server(instance_uuid, PLAIN))
    source = built.selections["host"]
    before = placement.consumer(instance_uuid).allocations
    conductor = conductors(agents={source: clients[source]})
    moved = conductor.resize(server(instance_uuid, PLAIN), BIGGER)
    assert moved.selections["dest"] == source
    assert all("no agent is known" in a["reason"] for a in moved.attempts)
    assert guests_of(clients, instance_uuid) == {source: moved.selections["claim_id"]}
    assert totals(placement.consumer(instance_uuid).allocations) == {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 2}
    assert_books_agree(placement, clients)

    conductor.revert_resize(moved.id)
    (claim,) = claims_of(clients, instance_uuid)[source]
    assert claim.claim_id == built.selections["claim_id"] and claim.state == "active"
    assert placement.consumer(instance_uuid).allocations == before
    assert guests_of(clients, instance_uuid) == {source: claim.claim_id}
    assert_books_agree(placement, clients)

    again = conductor.resize(server(instance_uuid, PLAIN), BIGGER)
    conductor.confirm_resize(again.id)
    (claim,) = claims_of(clients, instance_uuid)[source]
    assert claim.claim_id == again.selections["claim_id"] and claim.flavor.vcpus == 2
    assert placement.consumer(instance_uuid).allocations == claim.allocations
    assert placement.consumer(again.request["migration_uuid"]).allocations == {}
    assert guests_of(clients, instance_uuid) == {source: claim.claim_id}
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


class AgentLost(Exception):
    """The destination's agent did not answer (as when it is killed) at this step."""


def test_a_confirm_that_fails_midway_refuses_a_revert_and_is_finished_by_resume(
    conductors, placement, clients, instance_uuid
):
    conductor = conductors()
    conductor.build(server(instance_uuid, PLAIN))
    moved = conductor.resize(server(instance_uuid, PLAIN), BIGGER)
    migration, dest = moved.request["migration_uuid"], moved.selections["dest"]

    def lost(operation, step):
        if step == "confirm_dest":
            raise AgentLost(step)

    with pytest.raises(AgentLost):
        conductors(hook=lost).confirm_resize(moved.id)
    # The source's side is confirmed already: going back would leave the instance on nothing. The
    # confirmation runs on (left to a resume): the server is busy with it.
    with pytest.raises(ServerBusy, match="confirm_resize of move"):
        conductor.revert_resize(moved.id)
    conductors().resume()
    (claim,) = claims_of(clients, instance_uuid)[dest]
    assert claim.state == "active" and claim.flavor.vcpus == 2
    assert placement.consumer(migration).allocations == {}
    assert placement.consumer(instance_uuid).allocations == claim.allocations
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid, migration)


@pytest.mark.parametrize("kind", ["resize", "live_migrate"])
def test_a_move_whose_source_refuses_its_first_step_is_undone_without_it(
    kind, conductors, placement, clients, cloud, instance_uuid
):
    """The source's agent is gone before the move asks it anything (its host not yet seen down):
    the move fails at once, its reservation released, rather than waiting, running, for the
    source to undo what it never did (a host that never returns held it, and its servers, for good)."""
    conductor = conductors()
    built = conductor.build(server(instance_uuid, PLAIN))
    source = built.selections["host"]
    before = placement.consumer(instance_uuid).allocations
    cloud[source].stop()
    try:
        with pytest.raises(NotConnected):
            if kind == "resize":
                conductor.resize(server(instance_uuid, PLAIN), BIGGER)
            else:
                conductor.live_migrate(server(instance_uuid, PLAIN))
        (moved,) = [op for op in conductor.journal.for_instance(instance_uuid) if op.kind == kind]
        assert (moved.state, moved.step) in {(FAILED, "schedule"), (ROLLED_BACK, "schedule")}
        assert moved.selections[SOURCE_NEVER_REACHED] is True
        assert placement.consumer(moved.request["migration_uuid"]).allocations == {}
        assert placement.consumer(instance_uuid).allocations == before
    finally:
        cloud[source].start()
        clients[source] = cloud[source].client
    assert guests_of(clients, instance_uuid) == {source: built.selections["claim_id"]}
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid, moved.request["migration_uuid"])


@pytest.mark.parametrize("then", ["back", "evacuated"])
@pytest.mark.parametrize("kind", ["resize", "live_migrate"])
def test_a_move_whose_source_went_down_after_its_first_step_ends_once_the_host_is_seen_down(
    kind, then, conductors, placement, clients, cloud, instance_uuid
):
    """The source's agent dies once its claim is outgoing (move_out done), so the undo cannot ask
    it. While the host is only silent the move waits, running, for it; once the host is seen down
    the undo gives the books back without it and the move ends, so that its server can be
    evacuated (or deleted) instead of staying busy for as long as the host is away. What the source
    itself kept (its claim outgoing) is left to a clean-up that waits for the host: back with the
    server still there, its claim is the instance's again and the guest runs in it; evacuated
    meanwhile, the evacuation's clean-up takes the claim and this one gives nothing back."""
    down = set()
    conductor = conductors(hosts_down=down)
    built = conductor.build(server(instance_uuid, PLAIN))
    source = built.selections["host"]
    before = placement.consumer(instance_uuid).allocations

    def source_dies(operation, step):
        if step == "claim_dest":
            cloud[source].stop()
            raise AgentLost(step)

    moving = conductors(hook=source_dies, hosts_down=down)
    with pytest.raises(AgentLost):
        if kind == "resize":
            moving.resize(server(instance_uuid, PLAIN), BIGGER)
        else:
            moving.live_migrate(server(instance_uuid, PLAIN))
    try:
        (moved,) = conductor.journal.find(instance_uuid=instance_uuid, kind=kind)
        assert moved.state == RUNNING and "undoing it failed" in moved.error
        # Only silent: the undo still asks the source, and the move stays running.
        conductors(hosts_down=down).resume()
        assert conductor.journal.get(moved.id).state == RUNNING
        down.add(source)
        conductors(hosts_down=down).resume()
        moved = conductor.journal.get(moved.id)
        assert moved.state == ROLLED_BACK
        migration = moved.request["migration_uuid"]
        assert placement.consumer(migration).allocations == {}
        assert placement.consumer(instance_uuid).allocations == before
        (clean_up,) = conductor.journal.find(instance_uuid=instance_uuid, kind=CLEANUP)
        assert clean_up.state == RUNNING and clean_up.owner == ""
        assert clean_up.error == f"waiting for host {source} to be up again"
        assert clean_up.request == {"move": moved.id, "host": source, "migration_uuid": migration, "side": "revert"}
        # Left alone while the host is down: nobody takes it (or writes it) each round.
        conductors(hosts_down=down).resume()
        assert conductor.journal.get(clean_up.id).owner == ""
        if then == "evacuated":
            evacuated = conductor.evacuate(server(instance_uuid, PLAIN), source)
            assert evacuated.state == DONE
    finally:
        cloud[source].start()
        clients[source] = cloud[source].client
    down.discard(source)
    conductors(hosts_down=down).resume()
    clean_up = conductor.journal.get(clean_up.id)
    assert clean_up.state == DONE
    if then == "back":
        assert "server_left" not in clean_up.selections
        (claim,) = claims_of(clients, instance_uuid)[source]
        assert claim.state == "active" and claim.claim_id == built.selections["claim_id"]
        assert guests_of(clients, instance_uuid) == {source: claim.claim_id}
    else:
        assert clean_up.selections["server_left"]
        assert conductor.clean_up_evacuated(evacuated.id).state == DONE
        dest = evacuated.selections["dest"]
        assert list(claims_of(clients, instance_uuid)) == [dest]
        assert guests_of(clients, instance_uuid) == {dest: evacuated.selections["claim_id"]}
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid, migration)


def test_a_resize_whose_source_is_down_is_confirmed_without_it(conductors, placement, clients, cloud, instance_uuid):
    """The server runs on the destination, awaiting confirmation, when its source dies: the confirm
    lets go of the source's side in the books at once (a server whose source never returned could
    be neither confirmed nor deleted), and the source's agent drops its claim and old guest once
    it is back."""
    down = set()
    conductor = conductors(hosts_down=down)
    conductor.build(server(instance_uuid, PLAIN))
    moved = conductor.migrate(server(instance_uuid, PLAIN))
    source, dest = moved.request["source"], moved.selections["dest"]
    migration = moved.request["migration_uuid"]
    cloud[source].stop()
    try:
        down.add(source)
        confirmed = conductor.confirm_resize(moved.id)
        assert confirmed.state == DONE
        assert placement.consumer(migration).allocations == {}
        (claim,) = clients[dest].claims_for_instance(instance_uuid)
        assert claim.state == "active"
        assert placement.consumer(instance_uuid).allocations == claim.allocations
        (clean_up,) = conductor.journal.find(instance_uuid=instance_uuid, kind=CLEANUP)
        assert clean_up.state == RUNNING and clean_up.request["side"] == "drop"
    finally:
        cloud[source].start()
        clients[source] = cloud[source].client
    # Back, the source still has its side of the move and the old guest, until the clean-up.
    assert source in claims_of(clients, instance_uuid)
    down.discard(source)
    conductors(hosts_down=down).resume()
    assert conductor.journal.get(clean_up.id).state == DONE
    assert list(claims_of(clients, instance_uuid)) == [dest]
    assert guests_of(clients, instance_uuid) == {dest: claim.claim_id}
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid, migration)
