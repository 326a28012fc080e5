"""Soft delete, restore, shelve, shelve offload, unshelve on the instance's host and rebuild, each
killed before each of its steps and while writing its end, then resumed by a new conductor on the
same journal: the operation is finished, the claim is in the state the operation gives it, the
guest runs where it should, the instance's allocations are what they were (or freed, offloaded),
and nothing stays claimed that no one will finish."""

from __future__ import annotations

import pytest
from conductorhelpers import (
    BIGGER,
    PLAIN,
    FirstAnswerLost,
    assert_books_agree,
    assert_nothing_left,
    claims_of,
    guests_of,
    server,
)

from berth.clients.errors import AgentError
from berth.clients.http import TransportError
from berth.conductor.errors import CannotGoOn, ConductorError
from berth.conductor.journal import DONE, FAILED, RUNNING

pytestmark = pytest.mark.slow

# Killed while the end is written, after every step's effect is done.
END = "end"


class Killed(BaseException):
    """The conductor's process died here."""


def _before(conductor, kind, instance_uuid):
    """What each operation needs done first."""
    if kind == "restore":
        conductor.soft_delete(instance_uuid)
    if kind in ("shelve_offload", "unshelve"):
        conductor.shelve(instance_uuid)


def _run(conductor, kind, instance_uuid):
    if kind == "unshelve":
        return conductor.unshelve(server(instance_uuid, PLAIN))
    return getattr(conductor, kind)(instance_uuid)


# kind -> (its steps, the claim's state after it: None when it frees the claim)
OPERATIONS = {
    "soft_delete": (["soft_delete"], "soft_deleted"),
    "restore": (["restore"], "active"),
    "shelve": (["shelve"], "shelved"),
    "shelve_offload": (["check", "destroy", "offload"], None),
    "rebuild": (["check", "destroy", "spawn"], "active"),
    "unshelve": (["confirm"], "active"),
}
CASES = [(kind, step) for kind, (steps, _) in OPERATIONS.items() for step in [*steps, END]]


def _killer(conductors, kind, step):
    """A conductor that dies before ``step`` of ``kind`` (or while writing its end)."""
    if step != END:

        def hook(operation, reached):
            if operation.kind == kind and reached == step:
                raise Killed(step)

        return conductors(hook=hook)
    conductor = conductors()
    save = conductor.journal.save

    def dying_save(operation):
        if operation.kind == kind and operation.state == DONE:
            raise Killed("writing done")
        return save(operation)

    conductor.runner.journal.save = dying_save
    return conductor


@pytest.mark.parametrize(("kind", "step"), CASES)
def test_a_killed_life_cycle_operation_is_finished(conductors, placement, clients, instance_uuid, kind, step):
    conductor = conductors()
    built = conductor.build(server(instance_uuid, PLAIN))
    host, claim_id = built.selections["host"], built.selections["claim_id"]
    before = placement.consumer(instance_uuid).allocations
    _before(conductor, kind, instance_uuid)

    with pytest.raises(Killed):
        _run(_killer(conductors, kind, step), kind, instance_uuid)
    (dead,) = [o for o in conductor.journal.for_instance(instance_uuid) if o.kind == kind]
    assert dead.state == RUNNING

    successor = conductors(dead_after=0)
    (resumed,) = successor.resume()
    assert (resumed.id, resumed.kind, resumed.state) == (dead.id, kind, DONE)
    assert resumed.step == OPERATIONS[kind][0][-1]
    assert successor.resume() == []  # nothing is left running

    state = OPERATIONS[kind][1]
    if state is None:
        assert guests_of(clients, instance_uuid) == {}
        assert_nothing_left(placement, clients, instance_uuid)
        return
    (claim,) = claims_of(clients, instance_uuid)[host]
    assert list(claims_of(clients, instance_uuid)) == [host]
    assert (claim.claim_id, claim.state) == (claim_id, state)
    assert placement.consumer(instance_uuid).allocations == before == claim.allocations
    assert guests_of(clients, instance_uuid) == {host: claim_id}
    assert_books_agree(placement, clients)
    successor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


def test_an_offload_whose_destroy_was_never_answered_is_left_to_resume_not_failed(
    conductors, placement, clients, instance_uuid
):
    """The guest was destroyed and the agent died as it answered: failed, the offload would have left
    the server shelved with no guest; left to a resume, it goes on and ends offloaded."""
    conductors().build(server(instance_uuid, PLAIN))
    conductors().shelve(instance_uuid)
    lost: list[str] = []
    flaky = conductors(
        agents={name: FirstAnswerLost(client, "destroy_guest", lost) for name, client in clients.items()}
    )
    with pytest.raises(TransportError):
        flaky.shelve_offload(instance_uuid)
    assert lost
    (offloading,) = [o for o in flaky.journal.for_instance(instance_uuid) if o.kind == "shelve_offload"]
    assert flaky.journal.get(offloading.id).state == RUNNING
    conductors().resume()
    assert flaky.journal.get(offloading.id).state == DONE
    assert guests_of(clients, instance_uuid) == {}
    assert_nothing_left(placement, clients, instance_uuid)


def test_a_rebuild_whose_guest_does_not_start_is_left_to_resume(conductors, placement, clients, instance_uuid):
    """Past ``destroy`` a rebuild only goes forward: a spawn that fails leaves it to the next
    resume(), which starts the guest in the same claim."""
    conductor = conductors()
    built = conductor.build(server(instance_uuid, PLAIN))
    host, claim_id = built.selections["host"], built.selections["claim_id"]
    clients[host].set_faults(fail_next_spawns=1)
    with pytest.raises(AgentError):
        conductor.rebuild(instance_uuid)
    (left,) = [o for o in conductor.journal.for_instance(instance_uuid) if o.kind == "rebuild"]
    assert (left.state, left.step, left.owner) == (RUNNING, "destroy", "")
    assert guests_of(clients, instance_uuid) == {}
    (resumed,) = conductors().resume()
    assert (resumed.id, resumed.state, resumed.step) == (left.id, DONE, "spawn")
    assert guests_of(clients, instance_uuid) == {host: claim_id}
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


def _preempted(placement, clients, host, instance_uuid):
    """What a preempting pick and build leave of an instance: no allocations, no claim on its host."""
    clients[host].delete_instance(instance_uuid)
    assert placement.consumer(instance_uuid).allocations == {}


@pytest.mark.parametrize("ending", ["running", "resumed"])
def test_a_rebuild_whose_instance_was_preempted_meanwhile_ends_failed(
    conductors, placement, clients, instance_uuid, ending
):
    """Past ``destroy``, the instance lost its claim (a pick preempted it, its preemptor's claim
    dropped the instance's): nothing will ever give it back, so the rebuild ends failed, saying so,
    instead of being left to resumes that fail the same way and keep the server busy for ever."""
    built = conductors().build(server(instance_uuid, PLAIN))
    host = built.selections["host"]

    def preempt_at_spawn(operation, reached):
        if operation.kind == "rebuild" and reached == "spawn":
            _preempted(placement, clients, host, instance_uuid)
            if ending == "resumed":
                raise Killed(reached)

    conductor = conductors(hook=preempt_at_spawn)
    with pytest.raises(Killed if ending == "resumed" else CannotGoOn):
        conductor.rebuild(instance_uuid)
    if ending == "resumed":
        (ended,) = conductors(dead_after=0).resume()
    else:
        (ended,) = [o for o in conductor.journal.for_instance(instance_uuid) if o.kind == "rebuild"]
    assert (ended.state, ended.step) == (FAILED, "destroy")
    assert "no claim left" in (ended.error or "")
    assert guests_of(clients, instance_uuid) == {}
    assert_nothing_left(placement, clients, instance_uuid)


def test_offloading_a_moving_instance_is_refused_before_its_guest_goes(conductors, placement, clients, instance_uuid):
    """A resize awaiting confirm: both hosts run a guest (the source's until the confirm)."""
    conductor = conductors()
    built = conductor.build(server(instance_uuid, PLAIN))
    moved = conductor.resize(server(instance_uuid, PLAIN), BIGGER)
    guests = guests_of(clients, instance_uuid)
    assert guests[moved.selections["dest"]] == moved.selections["claim_id"]
    with pytest.raises(ConductorError, match="moving"):
        conductor.shelve_offload(instance_uuid)
    (refused,) = [o for o in conductor.journal.for_instance(instance_uuid) if o.kind == "shelve_offload"]
    assert (refused.state, refused.step) == ("failed", "")
    assert guests_of(clients, instance_uuid) == guests
    conductor.revert_resize(moved.id)
    assert guests_of(clients, instance_uuid) == {built.selections["host"]: built.selections["claim_id"]}
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid, moved.request["migration_uuid"])
