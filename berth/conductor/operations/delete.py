"""Delete: the guest, the host's claims and every allocation of the server gone.

    destroy ─▶ release_host ─▶ release_allocations ─▶ done

Nothing is undone: each step is repeated until it is done, and a resumed delete runs them all
again (each is harmless to repeat). A host whose agent is unknown or does not answer fails the
delete (``failed``, the error kept): deleting again, once the host is back, finishes it.
"""

from __future__ import annotations

from typing import Any

from berth.conductor.journal import DONE, FAILED, Operation
from berth.conductor.runner import Runner

KIND = "delete"


def delete(
    runner: Runner, instance_uuid: str, host: str | None = None, *, extra: dict[str, Any] | None = None
) -> Operation:
    """``extra``: more of the journaled request (a preemption's ``preempted_by``)."""
    host = host or runner.calls.host_of(instance_uuid)
    operation = runner.start(KIND, instance_uuid, {"host": host, **(extra or {})})
    try:
        _delete(runner, operation)
    except Exception as e:
        runner.end(operation, FAILED, str(e))
        raise
    return runner.end(operation, DONE)


def _delete(runner: Runner, operation: Operation) -> None:
    instance = operation.instance_uuid
    host = operation.request.get("host")
    # A resumed delete runs every step again whatever the journal says was done, so no step needs
    # a write of its own: each is written with the end (a failure's too).
    if host:
        agent = runner.agent(str(host))
        runner.run(operation, "destroy", lambda: agent.destroy_guest(instance), write=False)
        runner.run(operation, "release_host", lambda: agent.delete_instance(instance), write=False)

    def release_allocations() -> None:
        runner.calls.release_lease(instance)
        runner.calls.release(instance)

    runner.run(operation, "release_allocations", release_allocations, write=False)


def resume(runner: Runner, operation: Operation) -> Operation:
    _delete(runner, operation)
    return runner.end(operation, DONE)
