"""The life cycle steps that keep or free an instance's claims on its host: soft delete, restore,
shelve, shelve offload (unshelving an offloaded instance is a build: ``build.unshelve``) and
rebuild on the same host (elsewhere is an evacuation).

    soft_delete:     soft_delete ─▶ done          the claim is kept (soft_deleted), still counted
    restore:         restore ─▶ done              the claim is active again
    shelve:          shelve ─▶ done               the claim is kept (shelved), the guest too
    shelve_offload:  check ─▶ destroy ─▶ offload ─▶ done
                                                  the guest and the claim gone, the allocations freed
      (host down)    release_allocations ─▶ done  as a delete on a host that is down: what the host
                                                  holds (guest, claim) left to a clean-up that waits
                                                  for it (``host_leftovers``, which spares a server
                                                  unshelved onto that host since)
    preempted_offload: the same steps, for a server preempted (``operations.preemption``): it
                                                  starts from any state a server on its host is in
    rebuild:         check ─▶ destroy ─▶ spawn ─▶ done   a new guest in the same active claim (the
                                                  agent's rebuild claim on its own host changes nothing)

Each step can be repeated (the agent answers a claim already in the state asked as it is). A
refusal before the guest is destroyed (the claim is not in a state the step needs: a shelved
instance soft deleted, a moving one offloaded, a rebuild with no active claim) fails the operation
and changes nothing. Once ``destroy`` is done the operation only goes forward: a failure after it
(the agent not answering, the new guest not starting) leaves it to the next resume(), which runs
the steps after the recorded one, so that no claim stays without the guest it was kept for; a
rebuild whose instance has no claim left there by then (preempted) ends failed (``CannotGoOn``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Final

from berth.clients.agent import AgentClient
from berth.conductor.errors import CannotGoOn, ConductorError
from berth.conductor.journal import DONE, FAILED, Operation
from berth.conductor.operations.host_leftovers import CLEANUP
from berth.conductor.runner import Runner
from berth.domain.host.claims import Claim
from berth.domain.host.records import ACTIVE, MOVING

SOFT_DELETE: Final = "soft_delete"
RESTORE: Final = "restore"
SHELVE: Final = "shelve"
SHELVE_OFFLOAD: Final = "shelve_offload"
PREEMPTED_OFFLOAD: Final = "preempted_offload"
REBUILD: Final = "rebuild"

Step = Callable[[AgentClient, str], Any]


def _active_claim(agent: AgentClient, instance_uuid: str, claims: Sequence[Claim] | None = None) -> str:
    """The instance's active claim on ``agent``'s host (among ``claims`` when read already)."""
    found = agent.claims_for_instance(instance_uuid) if claims is None else claims
    active = [c for c in found if c.state == ACTIVE]
    if not active:
        raise ConductorError(f"instance {instance_uuid} has no active claim on {agent.host} to rebuild in")
    return active[0].claim_id


def _not_moving(agent: AgentClient, instance_uuid: str) -> None:
    """Offloading destroys the guest first: a move in flight (whose guest is on its way) refuses
    before, not after."""
    if any(c.state in MOVING for c in agent.claims_for_instance(instance_uuid)):
        raise ConductorError(f"instance {instance_uuid} is moving on {agent.host}; it cannot be offloaded")


def _spawn_in_active_claim(agent: AgentClient, instance_uuid: str) -> Any:
    """Past ``destroy``: an instance with no claim left on its host (a pick preempted it, and the
    preempting build's claim dropped its claim) has nothing to be rebuilt in, now or ever."""
    claims = agent.claims_for_instance(instance_uuid)
    if not claims:
        raise CannotGoOn(
            f"instance {instance_uuid} has no claim left on {agent.host} (preempted?): nothing to rebuild in"
        )
    return agent.spawn_guest(instance_uuid, _active_claim(agent, instance_uuid, claims))


STEPS: Final[dict[str, tuple[tuple[str, Step], ...]]] = {
    SOFT_DELETE: (("soft_delete", lambda agent, instance: agent.soft_delete_instance(instance)),),
    RESTORE: (("restore", lambda agent, instance: agent.restore_instance(instance)),),
    SHELVE: (("shelve", lambda agent, instance: agent.shelve_instance(instance)),),
    SHELVE_OFFLOAD: (
        ("check", _not_moving),
        ("destroy", lambda agent, instance: agent.destroy_guest(instance)),
        ("offload", lambda agent, instance: agent.shelve_offload_instance(instance)),
    ),
    PREEMPTED_OFFLOAD: (
        ("check", _not_moving),
        ("destroy", lambda agent, instance: agent.destroy_guest(instance)),
        ("offload", lambda agent, instance: agent.shelve_offload_instance(instance)),
    ),
    REBUILD: (
        ("check", _active_claim),
        ("destroy", lambda agent, instance: agent.destroy_guest(instance)),
        ("spawn", _spawn_in_active_claim),
    ),
}


# After this step the instance's guest is gone (or, its host down, its allocations): the operation
# is finished, never failed.
FORWARD_STEPS: Final = ("destroy", "release_allocations")
# The link from the clean-up an offload on a host that is down leaves to the offload.
OFFLOAD_LINK: Final = "shelve_offload"


def change(
    runner: Runner,
    kind: str,
    instance_uuid: str,
    host: str | None = None,
    *,
    extra: dict[str, Any] | None = None,
    host_down: bool = False,
) -> Operation:
    """``extra``: more of the journaled request (a preemption's ``preempted_by``); ``host_down``:
    the server's host is down, and an offload does not ask it."""
    host = host or runner.calls.host_of(instance_uuid)
    if host is None:
        raise ConductorError(f"instance {instance_uuid} holds no allocations on any host")
    request = {"host": host, **(extra or {})}
    if host_down and kind == SHELVE_OFFLOAD:
        request["host_down"] = True
    operation = runner.start(kind, instance_uuid, request)
    # A step sent and never answered may have been done (its guest destroyed, say): left to a
    # resume, which runs it again (each step is harmless to repeat), rather than failed.
    return runner.carry_out(
        operation, lambda: _change(runner, operation), lambda: None, FORWARD_STEPS, unanswered_goes_on=True
    )


def _offload_without_host(runner: Runner, operation: Operation) -> None:
    """As a delete on a host that is down ("local delete"): the server's allocations released
    (the claim's lease too, if one is left), and what its host holds for it left to a clean-up that
    waits for the host. Both are harmless to repeat."""
    instance = operation.instance_uuid

    def release_allocations() -> None:
        runner.calls.release_lease(instance)
        runner.calls.release(instance)

    runner.run(operation, "release_allocations", release_allocations, write=False)
    runner.leave_clean_up(CLEANUP, operation, str(operation.request["host"]), link=OFFLOAD_LINK)


def _change(runner: Runner, operation: Operation) -> None:
    """The steps after the recorded one."""
    if operation.request.get("host_down"):
        _offload_without_host(runner, operation)
        return
    agent = runner.agent(str(operation.request["host"]))
    steps = STEPS[operation.kind]
    names = [name for name, _ in steps]
    done = names.index(operation.step) + 1 if operation.step in names else 0
    for step, action in steps[done:]:
        # The check changes nothing (a resume checks again) and the last step is written with the
        # end; the others are written before the next starts, which a resume skips to.
        write = step != "check" and step != names[-1]
        runner.run(operation, step, functools.partial(action, agent, operation.instance_uuid), write=write)


def resume(runner: Runner, operation: Operation) -> Operation:
    try:
        _change(runner, operation)
    except CannotGoOn as e:
        return runner.end(operation, FAILED, str(e))
    return runner.end(operation, DONE)
