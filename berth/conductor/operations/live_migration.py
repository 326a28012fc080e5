"""Live migration, and its rollback.

    hand-over (moving) ─▶ accept_guest ─▶ migrate_out ─▶ drop_source ─▶ confirm_dest ─▶ done
            │                  │               │
            └── a failure ─────┴───────────────┘ (before the guest has left the source): undo
                (moving): the destination's guest destroyed and side reverted, the source's side
                reverted, its guest running ─▶ failed

The destination is never the instance's own host (the scheduler ignores it, as Nova's does; a
destination named that is the source is passed over). The destination takes the guest in its
incoming claim (``accept_guest``), then the source lets it go (``migrate_out``). From then on the
move only goes forward: the source's side is released (``drop_move_claim``) and the destination's
claim becomes the instance's (``confirm_migration``). A failure there leaves the operation to the
next resume(), which finishes it. A source seen down by then is not waited for: the books let go of
its side, and its agent drops its claim when it is back (``moving.resume_clean_up``).
"""

from __future__ import annotations

import uuid

from berth.clients.agent import AgentClient
from berth.conductor.errors import ConductorError
from berth.conductor.journal import DONE, Operation
from berth.conductor.operations.moving import drop_without_source, hand_over, undo
from berth.conductor.requests import ServerRequest
from berth.conductor.runner import Runner
from berth.domain.host.claims import Claim
from berth.domain.host.records import SourceContext
from berth.domain.host.request import InstanceSpec

KIND = "live_migrate"
# The steps after which the guest has left the source: the move is finished, never undone.
FORWARD_STEPS = ("migrate_out", "drop_source", "confirm_dest")


def live_migrate(runner: Runner, server: ServerRequest, source: str | None = None) -> Operation:
    """Live-migrate ``server`` from ``source`` (its host as its row names it; else the one its
    allocations are on, read from the service)."""
    source = source or runner.calls.host_of(server.instance_uuid)
    if source is None:
        raise ConductorError(f"instance {server.instance_uuid} holds no allocations on any host")
    request = {"server": server.to_dict(), "source": source, "migration_uuid": str(uuid.uuid4())}
    operation = runner.start(KIND, server.instance_uuid, request)
    return runner.carry_out(
        operation, lambda: _live_migrate(runner, operation, server), lambda: undo(runner, operation), FORWARD_STEPS
    )


def _live_migrate(runner: Runner, operation: Operation, server: ServerRequest) -> None:
    migration = str(operation.request["migration_uuid"])

    def live_migration_claim(agent: AgentClient, instance: InstanceSpec, context: SourceContext) -> Claim:
        return agent.live_migration_claim(instance, migration, context)

    hand_over(runner, operation, server, live_migration_claim, other_host=True)
    dest = runner.agent(str(operation.selections["dest"]))
    claim_id = str(operation.selections["claim_id"])
    # Until the guest has left the source a resume undoes the move: this record goes with the next write.
    runner.run(
        operation, "accept_guest", lambda: dest.migrate_guest(server.instance_uuid, claim_id=claim_id), write=False
    )
    _forward(runner, operation)


def _forward(runner: Runner, operation: Operation) -> None:
    """The steps after the recorded one, each harmless to repeat."""
    instance, migration = operation.instance_uuid, str(operation.request["migration_uuid"])
    source_host, dest_host = str(operation.request["source"]), str(operation.selections["dest"])
    source, dest = runner.agent(source_host), runner.agent(dest_host)
    steps = {
        "migrate_out": lambda: source.migrate_guest(instance, destination_host=dest_host),
        "drop_source": lambda: source.drop_move_claim(migration),
        "confirm_dest": lambda: dest.confirm_migration(migration),
    }
    if source_host in runner.scheduler_config.hosts_down:
        # The guest has left it: the server, running on the destination, is not kept busy for as
        # long as the host is away.
        steps["drop_source"] = lambda: drop_without_source(runner, operation)
    done = FORWARD_STEPS.index(operation.step) + 1 if operation.step in FORWARD_STEPS else 0
    # Each written before the next starts (a resume goes on after the one written); the last with the end.
    for step in FORWARD_STEPS[done:]:
        runner.run(operation, step, steps[step], write=step != FORWARD_STEPS[-1])


def resume(runner: Runner, operation: Operation) -> Operation:
    """Finished once the guest has left the source; otherwise undone (the guest runs on the source)."""
    if operation.step in FORWARD_STEPS:
        _forward(runner, operation)
        return runner.end(operation, DONE)
    undo(runner, operation)
    return runner.rolled_back(operation, "its conductor died before the guest left the source")
