"""Delete: the guest, the host's claims and every allocation of the server gone.

    destroy ─▶ release_host ─▶ release_allocations ─▶ done

Nothing is undone: each step is repeated until it is done, and a resumed delete runs them all
again (each is harmless to repeat). A host whose agent is unknown or does not answer fails the
delete (``failed``, the error kept): deleting again, once the host is back, finishes it.

A server whose host is down (its agent silent past the conductors' ``host_down_after``) is deleted
as Nova deletes one on a compute service that is down ("local delete"): only its allocations are
released, and the server is gone at once. What the host still holds for it (the guest and its
claim) is left to a clean-up, journaled before the delete ends, that waits, running and owned by
no conductor, until the host is up again; any conductor's resume then carries it out:

    (host down) release_allocations ─▶ done        clean_up_deleted: destroy ─▶ release_host ─▶ done
"""

from __future__ import annotations

from typing import Any

from berth.conductor.journal import DONE, FAILED, Operation
from berth.conductor.runner import Runner

KIND = "delete"
CLEANUP = "clean_up_deleted"


def delete(
    runner: Runner,
    instance_uuid: str,
    host: str | None = None,
    *,
    extra: dict[str, Any] | None = None,
    host_down: bool = False,
) -> Operation:
    """``extra``: more of the journaled request (a preemption's ``preempted_by``); ``host_down``:
    the server's host is down, and is not asked (the clean-up waits for it)."""
    host = host or runner.calls.host_of(instance_uuid)
    request = {"host": host, **(extra or {})}
    if host and host_down:
        request["host_down"] = True
    operation = runner.start(KIND, instance_uuid, request)
    try:
        _delete(runner, operation)
    except Exception as e:
        runner.end(operation, FAILED, str(e))
        raise
    return runner.end(operation, DONE)


def _delete(runner: Runner, operation: Operation) -> None:
    instance = operation.instance_uuid
    host = operation.request.get("host")
    if host and operation.request.get("host_down"):
        _release_allocations(runner, operation)
        runner.leave_clean_up(CLEANUP, operation, str(host), link="delete")
        return
    # A resumed delete runs every step again whatever the journal says was done, so no step needs
    # a write of its own: each is written with the end (a failure's too).
    deleted: list[str] = []
    if host:
        agent = runner.agent(str(host))
        runner.run(operation, "destroy", lambda: agent.destroy_guest(instance), write=False)
        runner.run(operation, "release_host", lambda: deleted.extend(agent.delete_instance(instance)), write=False)

    _release_allocations(runner, operation, host_released=bool(deleted))


def _release_allocations(runner: Runner, operation: Operation, *, host_released: bool = False) -> None:
    """``host_released``: the host deleted the server's claims, which freed everything the server
    held anywhere (the tracker's delete), so there is nothing left to ask the service for; a host
    that had no claim (a repeat, a resume, books the host never knew) leaves it to the service."""
    instance = operation.instance_uuid

    def release_allocations() -> None:
        if host_released:
            return
        runner.calls.release_lease(instance)
        runner.calls.release(instance)

    runner.run(operation, "release_allocations", release_allocations, write=False)


def resume(runner: Runner, operation: Operation) -> Operation:
    _delete(runner, operation)
    return runner.end(operation, DONE)


# -- the clean-up of a host that was down ----------------------------------------------------------


def resume_clean_up(runner: Runner, operation: Operation) -> Operation:
    """The host is back: the guest and the claims it kept for the deleted server go."""
    instance = operation.instance_uuid
    agent = runner.host_back(operation)
    if agent is None:
        return operation
    # Both steps are harmless to repeat: each is written with the end.
    runner.run(operation, "destroy", lambda: agent.destroy_guest(instance), write=False)
    runner.run(operation, "release_host", lambda: agent.delete_instance(instance), write=False)
    return runner.end(operation, DONE)
