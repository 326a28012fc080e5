"""A conductor "killed" between two steps (a hook raises where the step would start, and nothing of
the conductor handles it), then a new conductor on the same journal resumes: the operation is
finished or undone, and nothing stays allocated, claimed or running for it."""

from __future__ import annotations

import dataclasses
import time

import pytest
from agenthelpers import TOKEN
from conductorhelpers import (
    BIGGER,
    PLAIN,
    assert_books_agree,
    assert_nothing_left,
    claims_of,
    guests_of,
    lease_of,
    only_host_enabled,
    server,
)
from livehelpers import free_port

from berth.clients.agent import AgentClient
from berth.conductor.errors import NoValidHost
from berth.conductor.journal import DONE, FAILED, ROLLED_BACK, RUNNING

pytestmark = pytest.mark.slow


class Killed(BaseException):
    """The conductor's process died here."""


def kill_at(step, *, after=0):
    """A hook that kills the conductor when ``step`` is reached the ``after + 1``-th time."""
    seen = []

    def hook(operation, reached):
        if reached == step:
            seen.append(reached)
            if len(seen) > after:
                raise Killed(step)

    return hook


class AgentLost(Exception):
    """A step failed (an agent or the service did not answer)."""


def fail_at(step):
    """A hook that makes ``step`` fail, as an unanswered request would."""

    def hook(operation, reached):
        if reached == step:
            raise AgentLost(step)

    return hook


def left_running(conductors, instance_uuid, start):
    (operation,) = [o for o in conductors.made[-1].journal.for_instance(instance_uuid) if o.kind == start]
    assert operation.state == RUNNING
    return operation


# Build: killed before the guest ran, undone; killed after, finished. (A build that selects takes
# its lease with the scheduler's pick, in its schedule step.)
UNDONE_BUILD_STEPS = ["schedule", "claim", "spawn"]


@pytest.mark.parametrize("step", UNDONE_BUILD_STEPS)
def test_a_build_killed_before_its_guest_ran_is_undone(conductors, placement, clients, instance_uuid, step):
    with pytest.raises(Killed):
        conductors(hook=kill_at(step)).build(server(instance_uuid))
    dead = left_running(conductors, instance_uuid, "build")
    if step in ("claim", "spawn"):
        assert placement.consumer(instance_uuid).allocations  # the scheduler's claim, leased
        assert lease_of(placement, instance_uuid) is not None
    if step == "spawn":
        assert claims_of(clients, instance_uuid)  # the agent's claim

    successor = conductors(dead_after=0)
    (resumed,) = successor.resume()
    assert (resumed.id, resumed.state) == (dead.id, ROLLED_BACK)
    assert successor.journal.get(dead.id).owner == successor.owner
    assert guests_of(clients, instance_uuid) == {}
    assert_nothing_left(placement, clients, instance_uuid)


def test_a_build_killed_after_its_guest_ran_is_finished(conductors, placement, clients, instance_uuid):
    with pytest.raises(Killed):
        conductors(hook=kill_at("confirm")).build(server(instance_uuid))
    dead = left_running(conductors, instance_uuid, "build")
    assert dead.step == "spawn" and lease_of(placement, instance_uuid) is not None

    successor = conductors(dead_after=0)
    (resumed,) = successor.resume()
    assert (resumed.state, resumed.step) == (DONE, "confirm")
    host = dead.selections["host"]
    (claim,) = claims_of(clients, instance_uuid)[host]
    assert placement.consumer(instance_uuid).allocations == claim.allocations
    assert guests_of(clients, instance_uuid) == {host: claim.claim_id}
    assert lease_of(placement, instance_uuid) is None
    assert_books_agree(placement, clients)
    successor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


def test_a_live_owner_keeps_its_operations(conductors, placement, clients, instance_uuid):
    """Only an owner silent for dead_after seconds is dead: its heartbeat keeps the operation its own."""
    owner = conductors(hook=kill_at("claim"))
    owner.start()
    with pytest.raises(Killed):
        owner.build(server(instance_uuid))
    time.sleep(0.5)  # beats every 0.2 s
    assert conductors(dead_after=0.4).resume() == []
    owner.close()
    time.sleep(0.5)
    (resumed,) = conductors(dead_after=0.4).resume()
    assert resumed.state == ROLLED_BACK
    assert_nothing_left(placement, clients, instance_uuid)


def test_two_successors_resume_an_operation_once(conductors, placement, clients, instance_uuid):
    with pytest.raises(Killed):
        conductors(hook=kill_at("spawn")).build(server(instance_uuid))
    first, second = conductors(dead_after=0), conductors(dead_after=30)
    dead = left_running(conductors, instance_uuid, "build")
    assert first.journal.take_over(dead, first.owner, 0) is not None
    # The row second read is stale: the operation is first's now.
    assert second.journal.take_over(dead, second.owner, 0) is None
    assert second.resume() == []  # first beat just now, by taking it
    assert first.resume() == []  # a conductor does not resume its own operations
    (resumed,) = conductors(dead_after=0).resume()
    assert resumed.state == ROLLED_BACK
    assert_nothing_left(placement, clients, instance_uuid)


# Resize: killed before the guest ran on the destination, undone; after, kept awaiting confirm.
UNDONE_MOVE_STEPS = ["schedule", "move_out", "release_reservation", "claim_dest", "spawn_dest"]


@pytest.mark.parametrize("step", UNDONE_MOVE_STEPS)
def test_a_resize_killed_before_its_guest_moved_is_undone(conductors, placement, clients, instance_uuid, step):
    built = conductors().build(server(instance_uuid, PLAIN))
    before = placement.consumer(instance_uuid).allocations
    with pytest.raises(Killed):
        conductors(hook=kill_at(step)).resize(server(instance_uuid, PLAIN), BIGGER)
    dead = left_running(conductors, instance_uuid, "resize")
    migration = dead.request["migration_uuid"]

    (resumed,) = conductors(dead_after=0).resume()
    assert resumed.state == ROLLED_BACK
    source = built.selections["host"]
    (claim,) = claims_of(clients, instance_uuid)[source]
    assert claim.claim_id == built.selections["claim_id"] and claim.state == "active"
    assert list(claims_of(clients, instance_uuid)) == [source]
    assert placement.consumer(instance_uuid).allocations == before
    assert guests_of(clients, instance_uuid) == {source: claim.claim_id}
    assert_nothing_left(placement, clients, migration)
    conductors.made[-1].delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


@pytest.mark.parametrize("ending", ["killed", "failed"])
def test_a_same_host_resize_stopped_before_its_claim_is_undone_to_the_old_flavor(
    conductors, placement, clients, instance_uuid, ending
):
    """The scheduler's reservation is on the instance's own host and still leased when the move
    stops (its conductor killed and the move resumed, or the step failing and the move undone at
    once): the undo must not hand that reservation (the new flavor) to the instance when the
    source takes the instance back."""
    built = conductors().build(server(instance_uuid, PLAIN))
    source = built.selections["host"]
    before = placement.consumer(instance_uuid).allocations
    with only_host_enabled(placement, clients, source):
        if ending == "killed":
            with pytest.raises(Killed):
                conductors(hook=kill_at("release_reservation")).resize(server(instance_uuid, PLAIN), BIGGER)
            dead = left_running(conductors, instance_uuid, "resize")
            assert dead.selections["destinations"][0]["host"] == source
            assert placement.consumer(dead.request["migration_uuid"]).allocations  # the reservation
            (stopped,) = conductors(dead_after=0).resume()
            assert stopped.state == ROLLED_BACK
        else:
            with pytest.raises(AgentLost):
                conductors(hook=fail_at("release_reservation")).resize(server(instance_uuid, PLAIN), BIGGER)
            (stopped,) = [o for o in conductors.made[-1].journal.for_instance(instance_uuid) if o.kind == "resize"]
            assert stopped.state == FAILED
    (claim,) = claims_of(clients, instance_uuid)[source]
    assert claim.claim_id == built.selections["claim_id"] and claim.state == "active"
    assert list(claims_of(clients, instance_uuid)) == [source]
    assert placement.consumer(instance_uuid).allocations == before
    assert guests_of(clients, instance_uuid) == {source: claim.claim_id}
    assert_nothing_left(placement, clients, stopped.request["migration_uuid"])
    conductors.made[-1].delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


def test_a_resize_killed_while_writing_its_end_is_undone(conductors, placement, clients, instance_uuid):
    built = conductors().build(server(instance_uuid, PLAIN))
    before = placement.consumer(instance_uuid).allocations
    # The guest started on the destination; its step is written with the end, and the conductor
    # dies while writing it: the journal names the destination's claim, so the move is undone.
    killer = conductors()
    killer.runner.journal.save = _dying_save(killer.runner.journal.save)
    with pytest.raises(Killed):
        killer.resize(server(instance_uuid, PLAIN), BIGGER)
    dead = left_running(conductors, instance_uuid, "resize")
    assert dead.step == "claim_dest"

    (resumed,) = conductors(dead_after=0).resume()
    assert resumed.state == ROLLED_BACK
    source = built.selections["host"]
    (claim,) = claims_of(clients, instance_uuid)[source]
    assert list(claims_of(clients, instance_uuid)) == [source] and claim.state == "active"
    assert placement.consumer(instance_uuid).allocations == before
    assert guests_of(clients, instance_uuid) == {source: claim.claim_id}
    assert_nothing_left(placement, clients, dead.request["migration_uuid"])
    conductors.made[-1].delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


def test_a_resize_killed_after_its_guest_moved_is_kept_then_confirmed(conductors, placement, clients, instance_uuid):
    conductors().build(server(instance_uuid, PLAIN))
    # A row naming spawn_dest, still running: the conductor died once that step was written (as a
    # journal written step by step leaves it).
    killer = conductors()
    killer.runner.journal.save = _dying_save(killer.runner.journal.save, written_running=True)
    with pytest.raises(Killed):
        killer.resize(server(instance_uuid, PLAIN), BIGGER)
    dead = left_running(conductors, instance_uuid, "resize")
    assert dead.step == "spawn_dest"

    successor = conductors(dead_after=0)
    (resumed,) = successor.resume()
    assert resumed.state == DONE
    successor.confirm_resize(resumed.id)
    dest = dead.selections["dest"]
    (claim,) = claims_of(clients, instance_uuid)[dest]
    assert list(claims_of(clients, instance_uuid)) == [dest] and claim.flavor.vcpus == 2
    assert placement.consumer(instance_uuid).allocations == claim.allocations
    assert guests_of(clients, instance_uuid) == {dest: claim.claim_id}
    assert_books_agree(placement, clients)
    successor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid, dead.request["migration_uuid"])


def _dying_save(save, *, written_running=False):
    """The journal's save, dying when the resize would be written done; with ``written_running``,
    after writing it as it is but still running."""

    def dying(operation):
        if operation.kind == "resize" and operation.state == DONE:
            if written_running:
                save(dataclasses.replace(operation, state=RUNNING))
            raise Killed("writing done")
        return save(operation)

    return dying


@pytest.mark.parametrize("kind", ["confirm", "revert"])
def test_a_confirm_or_revert_killed_halfway_is_finished(conductors, placement, clients, instance_uuid, kind):
    built = conductors().build(server(instance_uuid, PLAIN))
    before = placement.consumer(instance_uuid).allocations
    moved = conductors().resize(server(instance_uuid, PLAIN), BIGGER)
    second_step = "confirm_source" if kind == "confirm" else "revert_dest"
    killer = conductors(hook=kill_at(second_step))
    with pytest.raises(Killed):
        (killer.confirm_resize if kind == "confirm" else killer.revert_resize)(moved.id)
    (resumed,) = conductors(dead_after=0).resume()
    assert resumed.state == DONE
    host = moved.selections["dest"] if kind == "confirm" else built.selections["host"]
    (claim,) = claims_of(clients, instance_uuid)[host]
    assert list(claims_of(clients, instance_uuid)) == [host]
    if kind == "revert":
        assert placement.consumer(instance_uuid).allocations == before
    assert placement.consumer(instance_uuid).allocations == claim.allocations
    assert guests_of(clients, instance_uuid) == {host: claim.claim_id}
    assert_nothing_left(placement, clients, moved.request["migration_uuid"])
    conductors.made[-1].delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


def test_the_lease_frees_a_dead_builds_claim_when_no_one_resumes(conductors, placement, clients, instance_uuid):
    """Killed between the scheduler's claim and the agent's, with no conductor left to resume: the
    service itself releases the allocations when the lease expires (its reaper passes every 5 s)."""
    with pytest.raises(Killed):
        conductors(hook=kill_at("claim"), lease_seconds=1).build(server(instance_uuid))
    assert placement.consumer(instance_uuid).allocations
    deadline = time.monotonic() + 20
    while placement.consumer(instance_uuid).allocations and time.monotonic() < deadline:
        time.sleep(0.25)
    assert_nothing_left(placement, clients, instance_uuid)


def test_a_finished_build_whose_lease_expired_is_undone(conductors, placement, clients, instance_uuid):
    """The guest ran, but the lease expired before anyone resumed: the build cannot be confirmed,
    and is undone rather than left with a claim the service no longer backs."""
    with pytest.raises(Killed):
        conductors(hook=kill_at("confirm"), lease_seconds=1).build(server(instance_uuid))
    deadline = time.monotonic() + 20
    while placement.consumer(instance_uuid).allocations and time.monotonic() < deadline:
        time.sleep(0.25)
    assert placement.consumer(instance_uuid).allocations == {}
    (resumed,) = conductors(dead_after=0).resume()
    assert resumed.state == ROLLED_BACK and "lease expired" in resumed.error
    assert guests_of(clients, instance_uuid) == {}
    assert_nothing_left(placement, clients, instance_uuid)


def test_a_resume_that_fails_is_left_for_the_next(conductors, placement, clients, instance_uuid):
    built = conductors().build(server(instance_uuid))
    with pytest.raises(Killed):
        conductors(hook=kill_at("release_host")).delete(instance_uuid)
    # A successor that knows no agent cannot finish the delete; it leaves it to anyone.
    assert conductors(dead_after=0, agents={}).resume() == []
    (left,) = [o for o in conductors.made[-1].journal.running() if o.instance_uuid == instance_uuid]
    assert left.owner == "" and "no agent is known" in left.error
    assert claims_of(clients, instance_uuid)
    (resumed,) = conductors(dead_after=60).resume()
    assert (resumed.kind, resumed.state, resumed.request["host"]) == ("delete", DONE, built.selections["host"])
    assert_nothing_left(placement, clients, instance_uuid)


def test_a_failed_build_whose_undo_fails_is_left_with_both_errors_and_undone_by_a_resume(
    conductors, placement, clients, instance_uuid
):
    """Every agent unreachable (their clients point at a port nobody listens on): each claim gets no
    answer, the build fails, and its undo cannot reach the last host either. The build is left to a
    resume at once, saying so, and the resume undoes it with that story, not as if its conductor died."""
    nowhere = f"http://127.0.0.1:{free_port()}"
    unreachable = {name: AgentClient(nowhere, token=TOKEN, timeout=5) for name in clients}
    with pytest.raises(NoValidHost):
        conductors(agents=unreachable).build(server(instance_uuid))
    (left,) = conductors.made[-1].journal.for_instance(instance_uuid)
    assert (left.state, left.owner) == (RUNNING, "")
    assert "No valid host" in left.error and "undoing it failed" in left.error

    (resumed,) = conductors().resume()  # dead_after does not matter: the build is nobody's
    assert (resumed.id, resumed.state) == (left.id, ROLLED_BACK)
    assert resumed.error == left.error
    assert_nothing_left(placement, clients, instance_uuid)


def test_a_killed_build_whose_first_resume_fails_says_its_conductor_died(conductors, placement, clients, instance_uuid):
    """The error of a failed resume is kept while the build waits for the next one, but it is not
    why the build was undone."""
    with pytest.raises(Killed):
        conductors(hook=kill_at("spawn")).build(server(instance_uuid))
    dead = left_running(conductors, instance_uuid, "build")
    nowhere = f"http://127.0.0.1:{free_port()}"
    unreachable = {name: AgentClient(nowhere, token=TOKEN, timeout=5) for name in clients}
    assert conductors(dead_after=0, agents=unreachable).resume() == []
    assert conductors.made[-1].journal.get(dead.id).error.startswith("resume failed: ")

    (resumed,) = conductors().resume()
    assert (resumed.id, resumed.state) == (dead.id, ROLLED_BACK)
    assert resumed.error == "its conductor died before the guest was started"
    assert_nothing_left(placement, clients, instance_uuid)
