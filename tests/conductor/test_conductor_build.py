"""Build and delete through the conductor against a real service and real agents: the build lands
and the books agree, a host whose agent refuses sends the build to the next alternate, no host
left is NoValidHost naming every attempt, and delete frees everything."""

from __future__ import annotations

import pytest
from conductorhelpers import (
    PLAIN,
    THREE_IN_ONE_CELL,
    TOO_BIG_FOR_ANY,
    FirstClaimUnanswered,
    assert_books_agree,
    assert_nothing_left,
    claims_of,
    guests_of,
    lease_of,
    server,
)

from berth.conductor.errors import NoValidHost
from berth.conductor.journal import DONE, FAILED, ROLLED_BACK, RUNNING
from berth.conductor.operations.host_leftovers import CLEANUP
from berth.scheduler.request.flavor import Flavor

pytestmark = pytest.mark.slow


def test_a_build_lands_and_the_books_agree(conductors, placement, clients, instance_uuid):
    conductor = conductors()
    operation = conductor.build(server(instance_uuid))
    assert operation.state == DONE and operation.step == "confirm"
    host = operation.selections["host"]
    claims = claims_of(clients, instance_uuid)
    assert list(claims) == [host]
    (claim,) = claims[host]
    assert claim.claim_id == operation.selections["claim_id"]
    assert placement.consumer(instance_uuid).allocations == claim.allocations
    assert guests_of(clients, instance_uuid) == {host: claim.claim_id}
    # Confirmed: the service will not release the allocations by itself.
    assert lease_of(placement, instance_uuid) is None
    assert_books_agree(placement, clients)
    # The journal has the same story as the operation returned.
    stored = conductor.journal.get(operation.id)
    assert (stored.state, stored.step, stored.selections["host"]) == (DONE, "confirm", host)
    conductor.delete(instance_uuid)


def test_delete_frees_the_claims_and_the_allocations(conductors, placement, clients, instance_uuid):
    conductor = conductors()
    conductor.build(server(instance_uuid))
    operation = conductor.delete(instance_uuid)
    assert operation.state == DONE and operation.step == "release_allocations"
    assert operation.request["host"] in clients
    assert_nothing_left(placement, clients, instance_uuid)
    # Deleting again finds nothing to free and says so by succeeding.
    assert conductor.delete(instance_uuid, operation.request["host"]).state == DONE


def test_a_refusing_host_sends_the_build_to_an_alternate(conductors, placement, clients, instance_uuid):
    conductor = conductors(max_attempts=3)
    operation = conductor.build(server(instance_uuid, THREE_IN_ONE_CELL))
    assert operation.state == DONE
    # Both narrow hosts were offered first (most free memory) and refused the one-cell guest.
    assert sorted(a["host"] for a in operation.attempts) == ["narrow-1", "narrow-2"]
    assert all("refused" in a["reason"] for a in operation.attempts)
    assert operation.selections["host"] == "wide"
    (claim,) = claims_of(clients, instance_uuid)["wide"]
    assert placement.consumer(instance_uuid).allocations == claim.allocations
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


def test_max_attempts_bounds_the_hosts_tried(conductors, placement, clients, instance_uuid):
    conductor = conductors(max_attempts=2)
    with pytest.raises(NoValidHost) as raised:
        conductor.build(server(instance_uuid, THREE_IN_ONE_CELL))
    assert len(raised.value.attempts) == 2
    assert_nothing_left(placement, clients, instance_uuid)


def test_no_host_left_is_no_valid_host_with_every_reason(conductors, placement, clients, instance_uuid):
    conductor = conductors(max_attempts=3)
    with pytest.raises(NoValidHost) as raised:
        conductor.build(server(instance_uuid, TOO_BIG_FOR_ANY))
    error = raised.value
    # The wide host has too little memory for Placement to offer it; each narrow host's agent refused.
    assert sorted(a["host"] for a in error.attempts) == ["narrow-1", "narrow-2"]
    assert "narrow-1" in str(error) and "narrow-2" in str(error) and "NUMA" in str(error)
    assert sorted(error.refused_claims) == ["narrow-1", "narrow-2"]
    (operation,) = conductor.journal.for_instance(instance_uuid)
    assert operation.state == FAILED and "No valid host" in operation.error
    assert_nothing_left(placement, clients, instance_uuid)


def test_nothing_offered_is_no_valid_host_with_the_schedulers_reason(conductors, placement, clients, instance_uuid):
    conductor = conductors()
    with pytest.raises(NoValidHost) as raised:
        conductor.build(server(instance_uuid, Flavor("huge", vcpus=64, memory_mb=512)))
    (attempt,) = raised.value.attempts
    assert attempt["host"] is None and "No valid host" in attempt["reason"] and "64 VCPU" in attempt["reason"]
    assert_nothing_left(placement, clients, instance_uuid)


def test_a_guest_that_does_not_start_is_rescheduled(conductors, placement, clients, instance_uuid):
    """The first host's spawn fails (the agent's fault injection): its claim is aborted and the next
    host claims and starts the guest."""
    failed = []

    def fail_first_spawn(operation, step):
        if step == "spawn" and not failed:
            failed.append(operation.selections["host"])
            clients[failed[0]].set_faults(fail_next_spawns=1)

    conductor = conductors(hook=fail_first_spawn)
    operation = conductor.build(server(instance_uuid, PLAIN))
    assert operation.state == DONE
    assert [a["host"] for a in operation.attempts] == failed
    assert "the guest did not start" in operation.attempts[0]["reason"]
    host = operation.selections["host"]
    assert host != failed[0]
    assert list(claims_of(clients, instance_uuid)) == [host]
    assert [g["uuid"] for g in clients[failed[0]].guests()].count(instance_uuid) == 0
    (guest,) = [g for g in clients[host].guests() if g["uuid"] == instance_uuid]
    assert guest["claim_id"] == operation.selections["claim_id"]
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)
    assert all(instance_uuid not in {g["uuid"] for g in c.guests()} for c in clients.values())


@pytest.mark.parametrize("lost", [True, False], ids=["answer_lost", "never_sent"])
def test_a_host_that_did_not_answer_its_claim_lets_go_before_the_next_is_tried(
    conductors, placement, clients, instance_uuid, lost
):
    """One whose claim may have landed is asked to let the instance go first; one never reached is
    not, and the build goes on to the next alternate either way."""
    first: list[str] = []
    let_go: list[str] = []
    conductor = conductors(
        max_attempts=3,
        agents={
            name: FirstClaimUnanswered(client, "instance_claim", "delete_instance", first, lost, let_go)
            for name, client in clients.items()
        },
    )
    operation = conductor.build(server(instance_uuid, PLAIN))
    (tried,) = first
    host = operation.selections["host"]
    assert operation.state == DONE and host != tried
    assert operation.attempts[0]["host"] == tried and "did not answer" in operation.attempts[0]["reason"]
    assert let_go == ([tried] if lost else [])
    assert list(claims_of(clients, instance_uuid)) == [host]
    (claim,) = claims_of(clients, instance_uuid)[host]
    assert placement.consumer(instance_uuid).allocations == claim.allocations
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


class AgentLost(Exception):
    """The host's agent did not answer (it was killed) at this step."""


def build_whose_host_dies_before_its_spawn(conductors, cloud, instance_uuid, down):
    """A build whose host's agent is stopped once it has claimed: (its journal, the build, the host)."""
    picked = {}

    def host_dies(operation, step):
        if step == "spawn":
            picked["host"] = host = operation.selections["host"]
            cloud[host].stop()
            raise AgentLost(step)

    with pytest.raises(AgentLost):
        conductors(hook=host_dies, hosts_down=down).build(server(instance_uuid, PLAIN))
    journal = conductors.made[-1].journal
    (built,) = journal.find(instance_uuid=instance_uuid, kind="build")
    return journal, built, picked["host"]


def test_a_build_whose_host_went_down_under_it_ends_once_the_host_is_seen_down(
    conductors, placement, clients, cloud, instance_uuid
):
    """The host dies after its claim, before the guest starts: the undo cannot ask it, and the build
    waits, running, while the host is only silent (its server could not even be deleted). Once the
    host is seen down the build ends on the books alone; the host, back, lets go of its claim."""
    down = set()
    journal, built, host = build_whose_host_dies_before_its_spawn(conductors, cloud, instance_uuid, down)
    try:
        assert built.state == RUNNING and "undoing it failed" in built.error
        conductors(hosts_down=down).resume()
        assert journal.get(built.id).state == RUNNING
        down.add(host)
        conductors(hosts_down=down).resume()
        assert journal.get(built.id).state == ROLLED_BACK
        assert placement.consumer(instance_uuid).allocations == {}
        assert lease_of(placement, instance_uuid) is None
        (clean_up,) = journal.find(instance_uuid=instance_uuid, kind=CLEANUP)
        assert clean_up.state == RUNNING and clean_up.request == {"build": built.id, "host": host}
    finally:
        cloud[host].start()
        clients[host] = cloud[host].client
    assert host in claims_of(clients, instance_uuid)  # until the clean-up
    down.discard(host)
    conductors(hosts_down=down).resume()
    assert journal.get(clean_up.id).state == DONE
    assert claims_of(clients, instance_uuid) == {}
    assert guests_of(clients, instance_uuid) == {}
    assert_nothing_left(placement, clients, instance_uuid)


def test_a_claim_the_host_lands_late_does_not_pass_for_the_server_placed_there_again(
    conductors, placement, clients, cloud, instance_uuid
):
    """The build rolled back while its host was down; back, the host lands the claim it still held
    (an agent that stalled writes it in the service late). The books then say the server is there,
    but no operation placed it there since: the clean-up lets go of the claim and its allocations."""
    down = set()
    journal, built, host = build_whose_host_dies_before_its_spawn(conductors, cloud, instance_uuid, down)
    try:
        down.add(host)
        conductors(hosts_down=down).resume()
        assert journal.get(built.id).state == ROLLED_BACK
        (clean_up,) = journal.find(instance_uuid=instance_uuid, kind=CLEANUP)
    finally:
        cloud[host].start()
        clients[host] = cloud[host].client
    [claim] = clients[host].claims_for_instance(instance_uuid)
    held = {**claim.allocations, **claim.shared_allocations}
    placement.request(
        "PUT",
        f"/allocations/{instance_uuid}",
        {
            "allocations": {rp: {"resources": dict(res)} for rp, res in held.items()},
            "consumer_generation": None,
            "project_id": "project",
            "user_id": "user",
            "consumer_type": "INSTANCE",
        },
    )
    down.discard(host)
    conductors(hosts_down=down).resume()
    ended = journal.get(clean_up.id)
    assert ended.state == DONE and "server_left" not in ended.selections, ended.selections
    assert claims_of(clients, instance_uuid) == {}
    assert guests_of(clients, instance_uuid) == {}
    assert_nothing_left(placement, clients, instance_uuid)


def test_the_clean_up_of_a_host_retired_while_it_was_down_ends_failed_saying_so(
    conductors, placement, clients, cloud, instance_uuid
):
    down = set()
    journal, built, host = build_whose_host_dies_before_its_spawn(conductors, cloud, instance_uuid, down)
    try:
        down.add(host)
        conductors(hosts_down=down).resume()
        (clean_up,) = journal.find(instance_uuid=instance_uuid, kind=CLEANUP)
        # Back (no longer down), but no agent is known for it any more: retired.
        others = {name: client for name, client in clients.items() if name != host}
        conductors(agents=others).resume()
        ended = journal.get(clean_up.id)
        assert ended.state == FAILED
        assert ended.error == f"no agent is known for host {host}; what it held for the server was not cleaned up"
    finally:
        cloud[host].start()
        clients[host] = cloud[host].client
    for claim in clients[host].claims_for_instance(instance_uuid):
        clients[host].abort(claim.claim_id)
    assert_nothing_left(placement, clients, instance_uuid)
