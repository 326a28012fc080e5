"""Evacuation: an instance whose host is down rebuilt on another one, and the source's clean-up
once it is back.

    schedule (and lease) ─▶ release_reservation ─▶ claim_dest ─▶ spawn_dest ─▶ confirm_dest ─▶ done
                                                     │  ▲
               the destination refused ◀─────────────┘  │ next alternate (up to max_attempts hosts)
    a failure before the guest started: the destination's guest and side reverted, the
    reservation released ─▶ failed (the instance stays on its dead host)

    clean_up (the source back): destroy_source_guest ─▶ cleanup_source ─▶ done
    clean_up (the source retired instead): release_source_allocations ─▶ done   (the books alone;
              should the host come back, the clean-up above still runs)

Nothing is asked of the source while it is down: the destination's claim (``evacuate_claim``)
moves the instance's allocations on the source to the migration's consumer, so they stay counted
against the source until it cleans up, and claims for itself. Its guest starts in the incoming
claim, which then becomes the instance's (``confirm_migration``). When the source is back its
agent forgets its claim on its own at start; ``clean_up`` also removes the old guest and makes
sure the migration's allocations are gone. Evacuating a host that is still up is not supported.
"""

from __future__ import annotations

import uuid

from berth.conductor.errors import ConductorError
from berth.conductor.journal import DONE, FAILED, Operation
from berth.conductor.operations.moving import claim_destination, release_reservation, schedule, undo_destination
from berth.conductor.requests import ServerRequest
from berth.conductor.runner import Runner

KIND = "evacuate"
CLEANUP = "clean_up_evacuated"
# A clean-up's request key: its source was retired, and only the books are put right.
RETIRED = "source_retired"
# The steps after which the guest runs on the destination: finished, never undone.
FORWARD_STEPS = ("spawn_dest", "confirm_dest")


def evacuate(runner: Runner, server: ServerRequest, source_host: str | None = None) -> Operation:
    source = source_host or runner.calls.host_of(server.instance_uuid)
    if source is None:
        raise ConductorError(f"instance {server.instance_uuid} holds no allocations on any host")
    request = {"server": server.to_dict(), "source": source, "migration_uuid": str(uuid.uuid4())}
    operation = runner.start(KIND, server.instance_uuid, request)
    return runner.carry_out(
        operation, lambda: _evacuate(runner, operation, server), lambda: _undo(runner, operation), FORWARD_STEPS
    )


def _evacuate(runner: Runner, operation: Operation, server: ServerRequest) -> None:
    migration, source = str(operation.request["migration_uuid"]), str(operation.request["source"])
    runner.reach(operation, "schedule")
    schedule(runner, operation, server, migration, other_host=True)
    release_reservation(runner, operation)
    instance = server.instance(runner.scheduler_config)
    claim_destination(
        runner, operation, server, lambda agent: agent.evacuate_claim(instance, migration, source), other_host=True
    )
    dest = runner.agent(str(operation.selections["dest"]))
    claim_id = str(operation.selections["claim_id"])
    runner.run(operation, "spawn_dest", lambda: dest.spawn_guest(server.instance_uuid, claim_id))
    _confirm(runner, operation)


def _confirm(runner: Runner, operation: Operation) -> None:
    dest = runner.agent(str(operation.selections["dest"]))
    # Written with the end (a resume from spawn_dest confirms again).
    runner.run(
        operation,
        "confirm_dest",
        lambda: dest.confirm_migration(str(operation.request["migration_uuid"])),
        write=False,
    )


def _undo(runner: Runner, operation: Operation) -> None:
    """The reservation if still leased (as every move's undo, ``moving.undo``), then the
    destination lets go (the migration's allocations go back to the instance); the source, down,
    is not asked."""
    migration = str(operation.request["migration_uuid"])
    runner.calls.release_lease(migration)
    undo_destination(runner, operation, other_host=True)
    runner.calls.release(migration)


def resume(runner: Runner, operation: Operation) -> Operation:
    if operation.step in FORWARD_STEPS:
        _confirm(runner, operation)
        return runner.end(operation, DONE)
    _undo(runner, operation)
    return runner.rolled_back(operation, "its conductor died before the guest started on the destination")


# -- the source's clean-up ----------------------------------------------------------------------------


def clean_up(runner: Runner, evacuation_id: str) -> Operation:
    """The source is back: its old guest and whatever it still holds for the evacuated instance go."""
    evacuation = runner.journal.get(evacuation_id)
    if evacuation is None or evacuation.kind != KIND or evacuation.state != DONE:
        raise ConductorError(f"operation {evacuation_id} is no finished evacuation")
    return _run_clean_up(runner, evacuation)


def forget_retired_source(runner: Runner, evacuation: Operation) -> Operation:
    """The source was retired before it came back: what the books still count against it for the
    evacuated instance (the migration's allocations) is released, journaled as a clean-up of its
    own. Should the host come back (registered anew), the usual clean-up still removes its old
    guest (``berth.conductor.control.plane``: a clean-up of the books alone does not count as done)."""
    return _run_clean_up(runner, evacuation, retired=True)


def _run_clean_up(runner: Runner, evacuation: Operation, *, retired: bool = False) -> Operation:
    """The clean-up of ``evacuation``'s source, journaled and carried out (``retired``: the books
    alone, the source having been retired)."""
    request: dict[str, object] = {
        "evacuation": evacuation.id,
        "source": evacuation.request["source"],
        "migration_uuid": evacuation.request["migration_uuid"],
    }
    if retired:
        request[RETIRED] = True
    operation = runner.start(CLEANUP, evacuation.instance_uuid, request)
    try:
        _clean_up(runner, operation)
    except Exception as e:
        runner.end(operation, FAILED, str(e))
        raise
    return runner.end(operation, DONE)


def _clean_up(runner: Runner, operation: Operation) -> None:
    instance, migration = operation.instance_uuid, str(operation.request["migration_uuid"])
    if operation.request.get(RETIRED):

        def release() -> None:
            runner.calls.release_lease(migration)
            runner.calls.release(migration)

        runner.run(operation, "release_source_allocations", release, write=False)
        return
    source = runner.agent(str(operation.request["source"]))
    # A resumed clean-up runs both steps again: each is written with the end.
    runner.run(operation, "destroy_source_guest", lambda: source.destroy_guest(instance), write=False)
    runner.run(operation, "cleanup_source", lambda: source.cleanup_evacuated(instance, migration), write=False)


def resume_clean_up(runner: Runner, operation: Operation) -> Operation:
    _clean_up(runner, operation)
    return runner.end(operation, DONE)
