"""Resize (to another host or the same one) and cold migration (to another host), then confirm or
revert.

    schedule (and lease) ─▶ move_out ─▶ release_reservation ─▶ claim_dest ─▶ spawn_dest ─▶ done (awaiting
                               │                                  │  ▲              │          confirm or revert)
                               │               refused ◀──────────┘  │ next alternate (up to max_attempts hosts)
                               │                                                     │
                               └── any other failure, or no host left ◀─────────────┘
                                    the destination's guest and side reverted, the source's side reverted and
                                    its guest running again, the reservation released ─▶ failed (NoValidHost
                                    names every host tried)

    confirm: destroy_source_guest ─▶ confirm_source ─▶ confirm_dest ─▶ done
    revert:  destroy_dest_guest ─▶ revert_dest ─▶ revert_source ─▶ source_guest ─▶ done

The steps up to the destination's claim, and the undo, are every move's (``moving``). The guest
starts on the destination in its incoming claim (on the same host the old guest is destroyed
first: a resize there restarts it) and leaves the source once the move is confirmed; a revert
restarts it on the source when it is not running there. The steps of the agents are those of a
move across two participants (the source lets go of the old side first on confirm, the
destination of the new side first on revert), and each can be repeated: an agent with nothing
left to do answers nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Final

from berth.clients.agent import AgentClient
from berth.conductor.errors import ConductorError, ServerBusy
from berth.conductor.journal import DONE, FAILED, RUNNING, Operation
from berth.conductor.operations.moving import drop_without_source, hand_over, restore_guest, undo
from berth.conductor.requests import ServerRequest
from berth.conductor.runner import Runner
from berth.domain.host.claims import Claim
from berth.domain.host.records import SourceContext
from berth.domain.host.request import InstanceSpec
from berth.scheduler.request.flavor import Flavor

RESIZE = "resize"
MIGRATE = "migrate"
CONFIRM = "confirm_resize"
REVERT = "revert_resize"
MOVE_KINDS = (RESIZE, MIGRATE)


def move(runner: Runner, server: ServerRequest, flavor: Flavor | None = None, source: str | None = None) -> Operation:
    """Resize ``server`` to ``flavor``, or migrate it (its own flavor) when ``flavor`` is None, from
    ``source`` (its host as its row names it; else the one its allocations are on, read from the
    service)."""
    kind = MIGRATE if flavor is None else RESIZE
    wanted = server if flavor is None else replace(server, flavor=flavor)
    source = source or runner.calls.host_of(server.instance_uuid)
    if source is None:
        raise ConductorError(f"instance {server.instance_uuid} holds no allocations on any host")
    request = {"server": wanted.to_dict(), "source": source, "migration_uuid": str(uuid.uuid4())}
    operation = runner.start(kind, server.instance_uuid, request)
    # An undo that fails too (a host not answering) leaves the move to a resume, with both errors.
    return runner.carry_out(operation, lambda: _move(runner, operation, wanted), lambda: undo(runner, operation), ())


def _move(runner: Runner, operation: Operation, server: ServerRequest) -> None:
    migration = str(operation.request["migration_uuid"])
    new_flavor = server.spec(runner.scheduler_config).host_request

    def resize_claim(agent: AgentClient, instance: InstanceSpec, context: SourceContext) -> Claim:
        return agent.resize_claim(instance, new_flavor, migration, context)

    # A cold migration leaves its host (Nova's libvirt driver cannot migrate to the same one); a
    # resize may stay.
    hand_over(runner, operation, server, resize_claim, other_host=operation.kind == MIGRATE)
    dest = runner.agent(str(operation.selections["dest"]))

    def spawn_dest() -> None:
        if operation.selections["dest"] == operation.request["source"]:
            dest.destroy_guest(server.instance_uuid)
        dest.spawn_guest(server.instance_uuid, str(operation.selections["claim_id"]))

    # Written with the end (a resume from the step before undoes the move, as it must for a
    # conductor killed between the guest's start and its write).
    runner.run(operation, "spawn_dest", spawn_dest, write=False)


def resume(runner: Runner, operation: Operation) -> Operation:
    """A dead conductor's move: kept (awaiting confirm or revert) when its row names spawn_dest,
    otherwise undone. The move writes spawn_dest with its end, so a row left running names it only
    when an older conductor, which wrote each step, died between the two."""
    if operation.step == "spawn_dest":
        return runner.end(operation, DONE)
    undo(runner, operation)
    return runner.rolled_back(operation, "its conductor died before the destination claimed")


# -- confirm and revert -----------------------------------------------------------------------------


def finish(runner: Runner, move_id: str, kind: str) -> Operation:
    """Confirm (``CONFIRM``) or revert (``REVERT``) the move ``move_id`` left awaiting."""
    moved = runner.journal.get(move_id)
    if moved is None or moved.kind not in MOVE_KINDS or moved.state != DONE or moved.step != "spawn_dest":
        raise ConductorError(f"operation {move_id} is no move awaiting confirm or revert")
    for later in runner.journal.for_instance(moved.instance_uuid):
        if later.kind not in (CONFIRM, REVERT) or later.request.get("move") != move_id:
            continue
        if later.state == DONE:
            raise ConductorError(f"move {move_id} was finished already ({later.kind}, operation {later.id})")
        if later.state == RUNNING:
            # Another operation runs on the server: what a client retries on, as for any other.
            raise ServerBusy(
                f"Server {moved.instance_uuid} is busy with operation {later.id} ({later.kind} of move {move_id}); "
                "wait for it to end (GET /operations/{id}) and ask again."
            )
        if later.state == FAILED and later.step and later.kind != kind:
            # Half confirmed (or reverted) by an older conductor: only the same way is left.
            raise ConductorError(
                f"move {move_id} was half finished by {later.kind} (operation {later.id}); {later.kind} it again"
            )
    request = {
        "move": move_id,
        "source": moved.request["source"],
        "dest": moved.selections["dest"],
        "migration_uuid": moved.request["migration_uuid"],
    }
    operation = runner.start(kind, moved.instance_uuid, request)
    # Once a step is done there is no way back, only on: a failure then leaves the operation to the
    # next resume(), and the other way is refused meanwhile.
    # A step sent and never answered may have been done (an agent killed as it answered): the
    # operation goes on from there, by a resume, which runs every step again, rather than failing
    # with the step done (a revert's first step done, the server left awaiting a confirmation).
    return runner.carry_out(
        operation, lambda: _finish(runner, operation), lambda: None, FINISH_STEPS, unanswered_goes_on=True
    )


FINISH_STEPS: Final = (
    "destroy_source_guest",
    "confirm_source",
    "confirm_dest",
    "destroy_dest_guest",
    "revert_dest",
    "revert_source",
    "source_guest",
)


def _finish(runner: Runner, operation: Operation) -> None:
    instance, migration = operation.instance_uuid, str(operation.request["migration_uuid"])
    source = runner.agent(str(operation.request["source"]))
    dest = runner.agent(str(operation.request["dest"]))
    same_host = operation.request["source"] == operation.request["dest"]
    source_down = not same_host and operation.request["source"] in runner.scheduler_config.hosts_down
    steps: list[tuple[str, Callable[[], object]]]
    if operation.kind == CONFIRM and source_down:
        # The server runs on the destination: a source that is down is not waited for (its server
        # could be neither confirmed nor deleted for as long as the host is away).
        steps = [
            ("confirm_source", lambda: drop_without_source(runner, operation)),
            ("confirm_dest", lambda: dest.confirm_migration(migration)),
        ]
    elif operation.kind == CONFIRM:
        steps = [
            ("destroy_source_guest", lambda: source.destroy_guest(instance)),
            ("confirm_source", lambda: source.confirm_migration(migration)),
            ("confirm_dest", lambda: dest.confirm_migration(migration)),
        ]
    else:
        steps = [
            ("destroy_dest_guest", lambda: dest.destroy_guest(instance)),
            ("revert_dest", lambda: dest.revert_migration(migration)),
            ("revert_source", lambda: source.revert_migration(migration)),
            ("source_guest", lambda: restore_guest(source, instance)),
        ]
    if same_host:
        steps = [(name, action) for name, action in steps if name in ("confirm_source", "revert_dest", "source_guest")]
    # Each step is written before the next starts; the last one with the end.
    for position, (name, action) in enumerate(steps):
        runner.run(operation, name, action, write=position < len(steps) - 1)


def resume_finish(runner: Runner, operation: Operation) -> Operation:
    _finish(runner, operation)
    return runner.end(operation, DONE)
