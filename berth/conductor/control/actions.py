"""The servers' actions, as Nova's API names them, each the conductor's operation that carries it
out (``POST /servers/{id}/action`` with one of these keys)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Final

from berth.conductor.errors import ConductorError, InvalidState, ServerBusy
from berth.conductor.journal import RUNNING, Operation
from berth.conductor.operations import build, delete, evacuation, lifecycle, live_migration, moves
from berth.conductor.records import server_states
from berth.conductor.records.tables import Record
from berth.conductor.requests import ServerRequest
from berth.conductor.runner import Runner
from berth.scheduler.request.flavor import Flavor

# What one action runs, given the runner, the server's row and request, and the action's arguments
# as the API read them (a resize's flavor).
Work = Callable[[Runner], Operation]


def _confirm_or_revert(kind: str) -> Callable[[Record, ServerRequest, Mapping[str, Any]], Work]:
    def work(row: Record, server: ServerRequest, args: Mapping[str, Any]) -> Work:
        move = row["move_id"]
        if move is None:
            raise InvalidState(
                f"Server {row['id']} has no resize or migration awaiting confirmation (it is {row['status']})."
            )
        return lambda runner: moves.finish(runner, str(move), kind)

    return work


def _life(kind: str) -> Callable[[Record, ServerRequest, Mapping[str, Any]], Work]:
    def work(row: Record, server: ServerRequest, args: Mapping[str, Any]) -> Work:
        host, host_down = row["host"], bool(args.get("host_down"))
        return lambda runner: lifecycle.change(runner, kind, server.instance_uuid, host, host_down=host_down)

    return work


# A move starts from the host the server's row names: the row is written with each operation's steps
# and no operation is in flight on the server, so it is the host the books hold it on (the move's
# first step, on that host's agent, checks it again), and the service is not asked.
def _resize(row: Record, server: ServerRequest, args: Mapping[str, Any]) -> Work:
    flavor: Flavor = args["flavor"]
    source = row["host"]
    return lambda runner: moves.move(runner, server, flavor, source)


def _migrate(row: Record, server: ServerRequest, args: Mapping[str, Any]) -> Work:
    source = row["host"]
    return lambda runner: moves.move(runner, server, source=source)


def _live_migrate(row: Record, server: ServerRequest, args: Mapping[str, Any]) -> Work:
    source = row["host"]
    return lambda runner: live_migration.live_migrate(runner, server, source)


def _evacuate(row: Record, server: ServerRequest, args: Mapping[str, Any]) -> Work:
    source = row["host"]
    return lambda runner: evacuation.evacuate(runner, server, source)


def _unshelve(row: Record, server: ServerRequest, args: Mapping[str, Any]) -> Work:
    """``availability_zone`` (null: any) in ``args``: the zone the scheduler picks in, as Nova's
    unshelve takes it, which the server keeps (``server_states.outcome``) as Nova keeps it in the
    server's request spec. Only an offloaded server is placed anew: a shelved one is on its host."""
    if "availability_zone" in args:
        if row["status"] != server_states.SHELVED_OFFLOADED:
            raise InvalidState(
                f"Server {row['id']} is {row['status']}: an availability zone is given to unshelve a "
                f"{server_states.SHELVED_OFFLOADED} server only (a shelved one is still on its host)."
            )
        server = replace(server, availability_zone=args["availability_zone"])
    return lambda runner: build.unshelve(runner, server)


def _delete(row: Record, server: ServerRequest, args: Mapping[str, Any]) -> Work:
    host, move = row["host"], row["move_id"]
    if move is None:
        host_down = bool(args.get("host_down"))
        return lambda runner: delete.delete(runner, server.instance_uuid, host, host_down=host_down)

    def confirm_then_delete(runner: Runner) -> Operation:
        # As Nova deletes a server awaiting its resize's confirmation: the move is confirmed first
        # (the source's side goes), then the server is deleted where it went. The caller is told of
        # the delete's operation, not of the confirmation's.
        confirming: list[Operation] = []
        try:
            moves.finish(runner.listening(confirming.append), str(move), moves.CONFIRM)
        except (ConductorError, ServerBusy):
            raise
        except Exception as e:  # a host that does not answer, say: the caller is told why, not a 500
            raise ConfirmFailed(runner, row, confirming, e) from e
        return delete.delete(runner, server.instance_uuid, host)

    return confirm_then_delete


class ConfirmFailed(ConductorError):
    """The confirmation a delete of a server awaiting it starts with failed: nothing was deleted."""

    def __init__(self, runner: Runner, row: Record, confirming: list[Operation], error: Exception):
        if not confirming:
            what = f"confirming it failed: {error}"
        else:
            operation = runner.journal.get(confirming[0].id) or confirming[0]
            # Past its first step a confirmation goes on only forwards: a resume finishes it.
            state = "left for the conductors to finish" if operation.state == RUNNING else operation.state
            what = f"confirming it failed (operation {operation.id}, {state}): {error}"
        super().__init__(
            f"Server {row['id']} awaits the confirmation of its resize, which its delete does first, and {what}. "
            "Nothing was deleted; delete it again once the hosts of the move answer."
        )


# Action (the API's key) -> the conductor's operation kind and how it is started.
ACTIONS: Final[Mapping[str, tuple[str, Callable[[Record, ServerRequest, Mapping[str, Any]], Work]]]] = {
    "resize": (moves.RESIZE, _resize),
    "migrate": (moves.MIGRATE, _migrate),
    "confirmResize": (moves.CONFIRM, _confirm_or_revert(moves.CONFIRM)),
    "revertResize": (moves.REVERT, _confirm_or_revert(moves.REVERT)),
    "os-migrateLive": (live_migration.KIND, _live_migrate),
    "evacuate": (evacuation.KIND, _evacuate),
    "shelve": (lifecycle.SHELVE, _life(lifecycle.SHELVE)),
    "shelveOffload": (lifecycle.SHELVE_OFFLOAD, _life(lifecycle.SHELVE_OFFLOAD)),
    "unshelve": (build.UNSHELVE, _unshelve),
    "rebuild": (lifecycle.REBUILD, _life(lifecycle.REBUILD)),
    "softDelete": (lifecycle.SOFT_DELETE, _life(lifecycle.SOFT_DELETE)),
    "restore": (lifecycle.RESTORE, _life(lifecycle.RESTORE)),
    "forceDelete": (delete.KIND, _delete),
}


def check_state(row: Record, kind: str) -> None:
    """Refused at once, before any read of the service, when the server's state cannot allow it
    (its operation's start checks again, atomically)."""
    allowed = server_states.ALLOWED[kind]
    if kind == delete.KIND and row["status"] == server_states.VERIFY_RESIZE and row["move_id"] is not None:
        return  # confirmed first (``_delete``)
    if row["status"] not in allowed:
        raise InvalidState(
            f"Cannot '{kind}' server {row['id']} while it is {row['status']}; it must be one of {', '.join(allowed)}."
        )
