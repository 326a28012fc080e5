"""A server's states, as Nova names them, and how an operation's start and end move them.

    BUILD ──build──▶ ACTIVE ──resize, migrate──▶ VERIFY_RESIZE ──confirm, revert──▶ ACTIVE
      │                │ ├─shelve──▶ SHELVED ──shelve_offload──▶ SHELVED_OFFLOADED
      ▼                │ │              └──────unshelve (either)──────▶ ACTIVE
    ERROR              │ ├─soft_delete──▶ SOFT_DELETED ──restore──▶ ACTIVE
                       │ └─live_migrate, evacuate, rebuild──▶ ACTIVE (elsewhere, or anew)
                       └─delete (from any state; VERIFY_RESIZE confirmed first)──▶ DELETED

An operation that fails or is rolled back leaves the server as it was (the conductor undid what it
did), with the reason kept as its fault; a build that fails leaves it in ERROR, to be deleted or
rebuilt elsewhere, and so does an evacuation (the server stays on its dead host), to be evacuated
again, and a delete that failed after one of its steps (nothing of a delete is undone), to be
deleted again. While an operation runs, the status shown is the operation's (``BUILD``,
``RESIZE``, ``MIGRATING``, ``REBUILD``, ...) and its task state names it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from berth.conductor.journal import DONE, Operation
from berth.conductor.operations import (
    build,
    delete,
    evacuation,
    host_leftovers,
    lifecycle,
    live_migration,
    moves,
    moving,
)

BUILDING: Final = "BUILD"
ACTIVE: Final = "ACTIVE"
ERROR: Final = "ERROR"
VERIFY_RESIZE: Final = "VERIFY_RESIZE"
SHELVED: Final = "SHELVED"
SHELVED_OFFLOADED: Final = "SHELVED_OFFLOADED"
SOFT_DELETED: Final = "SOFT_DELETED"
DELETED: Final = "DELETED"
STATUSES: Final = (BUILDING, ACTIVE, ERROR, VERIFY_RESIZE, SHELVED, SHELVED_OFFLOADED, SOFT_DELETED, DELETED)

# The states each operation may start from (a build makes its server: it starts from none). A
# server awaiting a resize's confirmation holds claims on two hosts: a delete asked of it confirms
# the move first, as Nova's does, and starts from ACTIVE then (``control.actions``).
ALLOWED: Final[Mapping[str, tuple[str, ...]]] = {
    delete.KIND: (ACTIVE, ERROR, SHELVED, SHELVED_OFFLOADED, SOFT_DELETED),
    lifecycle.SOFT_DELETE: (ACTIVE,),
    lifecycle.RESTORE: (SOFT_DELETED,),
    lifecycle.SHELVE: (ACTIVE,),
    lifecycle.SHELVE_OFFLOAD: (SHELVED,),
    # A server preempted (its allocations gone) is offloaded from wherever it is on its host.
    lifecycle.PREEMPTED_OFFLOAD: (ACTIVE, ERROR, SHELVED, SOFT_DELETED),
    build.UNSHELVE: (SHELVED, SHELVED_OFFLOADED),
    lifecycle.REBUILD: (ACTIVE, ERROR),
    moves.RESIZE: (ACTIVE,),
    moves.MIGRATE: (ACTIVE,),
    moves.CONFIRM: (VERIFY_RESIZE,),
    moves.REVERT: (VERIFY_RESIZE,),
    live_migration.KIND: (ACTIVE,),
    evacuation.KIND: (ACTIVE, ERROR),
}

# Operations that do not take their server's slot: the clean-up of an evacuated server's old host
# runs beside whatever the server does next, that of a deleted server's host after its end, and
# those of a host that was down when a build or move ended without it, while the server is
# deleted, evacuated or moved again.
SLOTLESS: Final = frozenset({evacuation.CLEANUP, delete.CLEANUP, moving.CLEANUP, host_leftovers.CLEANUP})

# Nova's vm_state of each status: its own words, not the status's (a resize awaiting its confirmation
# is ``resized``, a soft-deleted server ``soft-delete``).
VM_STATES: Final[Mapping[str, str]] = {
    BUILDING: "building",
    ACTIVE: "active",
    ERROR: "error",
    VERIFY_RESIZE: "resized",
    SHELVED: "shelved",
    SHELVED_OFFLOADED: "shelved_offloaded",
    SOFT_DELETED: "soft-delete",
    DELETED: "deleted",
}

# The status shown while an operation runs (the stored state otherwise), and its task state.
_STATUS_WHILE: Final[Mapping[str, str]] = {
    build.KIND: BUILDING,
    moves.RESIZE: "RESIZE",
    moves.MIGRATE: "RESIZE",
    moves.REVERT: "REVERT_RESIZE",
    live_migration.KIND: "MIGRATING",
    evacuation.KIND: "REBUILD",
    lifecycle.REBUILD: "REBUILD",
}
_TASK_STATE: Final[Mapping[str, str]] = {
    build.KIND: "spawning",
    build.UNSHELVE: "unshelving",
    delete.KIND: "deleting",
    lifecycle.SOFT_DELETE: "soft_deleting",
    lifecycle.RESTORE: "restoring",
    lifecycle.SHELVE: "shelving",
    lifecycle.SHELVE_OFFLOAD: "shelving_offloading",
    lifecycle.PREEMPTED_OFFLOAD: "shelving_offloading",
    lifecycle.REBUILD: "rebuilding",
    moves.RESIZE: "resize_migrating",
    moves.MIGRATE: "resize_migrating",
    moves.CONFIRM: "resize_confirming",
    moves.REVERT: "resize_reverting",
    live_migration.KIND: "migrating",
    evacuation.KIND: "rebuilding",
}

# The state a finished operation leaves its server in, where that is all it changes.
_STATE_AFTER: Final[Mapping[str, str]] = {
    lifecycle.SOFT_DELETE: SOFT_DELETED,
    lifecycle.RESTORE: ACTIVE,
    lifecycle.SHELVE: SHELVED,
    lifecycle.REBUILD: ACTIVE,
    moves.CONFIRM: ACTIVE,
}


def shown_status(status: str, running_kind: str | None) -> str:
    return _STATUS_WHILE.get(running_kind, status) if running_kind else status


def task_state(running_kind: str | None) -> str | None:
    return _TASK_STATE.get(running_kind) if running_kind else None


def outcome(server: Mapping[str, Any], operation: Operation, now: float) -> dict[str, Any]:
    """The columns of ``server``'s row that ``operation``'s end changes (the slot it held is freed
    by the caller)."""
    kind, selections = operation.kind, operation.selections
    if operation.state != DONE:
        if kind == build.KIND:
            return {"status": ERROR, "host": None, "fault": operation.error}
        if kind == evacuation.KIND:
            # Still on its dead host, and not running anywhere: in ERROR, as Nova leaves a server
            # whose evacuation found no host, to be evacuated again (or rebuilt once its host is
            # back, or deleted).
            return {"status": ERROR, "fault": operation.error}
        if kind == delete.KIND and operation.step:
            # Past its first step (the guest destroyed, say) the server no longer runs as it did,
            # and a delete is never undone: in ERROR, as Nova leaves a server whose delete failed,
            # to be deleted again (its host's agent may even finish it when it starts again).
            return {"status": ERROR, "fault": operation.error}
        return {"fault": operation.error}
    # A server ended because a build preempted it says so, as its fault.
    preempted_by = operation.request.get("preempted_by")
    done: dict[str, Any] = {"fault": f"preempted by {preempted_by}" if preempted_by else None}
    if kind in (build.KIND, build.UNSHELVE):
        placed = {**done, "status": ACTIVE, "host": selections.get("host") or server["host"]}
        if kind == build.UNSHELVE and "availability_zone" in operation.request:
            # The zone it was unshelved into (its own, unless the unshelve gave one) stays its own:
            # its moves stay in it, as Nova keeps it in the server's request spec.
            placed["request"] = {**server["request"], "availability_zone": operation.request["availability_zone"]}
        return placed
    if kind in moves.MOVE_KINDS:
        return {
            **done,
            "status": VERIFY_RESIZE,
            "host": selections["dest"],
            "request": operation.request["server"],
            "old_request": server["request"],
            "move_id": operation.id,
        }
    if kind == moves.REVERT:
        return {
            **done,
            "status": ACTIVE,
            "host": operation.request["source"],
            "request": server["old_request"] or server["request"],
            "old_request": None,
            "move_id": None,
        }
    if kind in (live_migration.KIND, evacuation.KIND):
        return {**done, "status": ACTIVE, "host": selections["dest"]}
    if kind == delete.KIND:
        return {**done, "status": DELETED, "host": None, "deleted_at": now, "move_id": None}
    if kind in (lifecycle.SHELVE_OFFLOAD, lifecycle.PREEMPTED_OFFLOAD):
        return {**done, "status": SHELVED_OFFLOADED, "host": None}
    if kind == moves.CONFIRM:
        return {**done, "status": ACTIVE, "old_request": None, "move_id": None}
    return {**done, "status": _STATE_AFTER[kind]}
