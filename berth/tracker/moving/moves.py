"""Moving an instance between two hosts: the conductor's side of the protocol.

``source`` and ``dest`` are ``MoveParticipant``s: a ``ResourceTracker`` in this process or an
``AgentClient`` speaking to the host's agent.  Each step takes one host's lock at a time (never both),
so two moves crossing in opposite directions cannot deadlock.

    claim = start_move(src, dst, instance, migration, kind="resize", new_flavor=bigger)
    ...                                   # copy disks, start the guest on the destination
    confirm_move(src, dst, migration)     # or revert_move(src, dst, migration)
"""

from __future__ import annotations

from berth.domain.host.claims import Claim
from berth.domain.host.request import Flavor, InstanceSpec
from berth.tracker.moving.participant import MoveParticipant

MOVE_KINDS = ("resize", "live_migration")


class MoveClaim(Claim):
    """The destination's claim, whose abort also hands the instance back to the source."""

    def __init__(self, claim: Claim, source: MoveParticipant, dest: MoveParticipant, migration_uuid: str):
        super().__init__(claim.record, dest)
        self.source = source
        self.dest = dest
        self.migration_uuid = migration_uuid

    def abort(self) -> None:
        revert_move(self.source, self.dest, self.migration_uuid)


def _same_host(source: MoveParticipant, dest: MoveParticipant) -> bool:
    return source is dest or source.host == dest.host


def start_move(
    source: MoveParticipant,
    dest: MoveParticipant,
    instance: InstanceSpec,
    migration_uuid: str,
    *,
    kind: str = "resize",
    new_flavor: Flavor | None = None,
) -> MoveClaim:
    """Hand the instance over from ``source`` and claim it on ``dest``, in that order."""
    if kind not in MOVE_KINDS:
        raise ValueError(f"kind is one of {', '.join(MOVE_KINDS)}")
    context = source.begin_move_out(instance.uuid, migration_uuid)
    try:
        if kind == "resize":
            claim = dest.resize_claim(instance, new_flavor or context.flavor, migration_uuid, context)
        else:
            claim = dest.live_migration_claim(instance, migration_uuid, context)
    except BaseException:
        source.revert_migration(migration_uuid)
        raise
    return MoveClaim(claim, source, dest, migration_uuid)


def confirm_move(source: MoveParticipant, dest: MoveParticipant, migration_uuid: str) -> list[str]:
    """The source lets go of the old side first, then the destination's claim becomes the instance's."""
    done = source.confirm_migration(migration_uuid)
    if not _same_host(source, dest):
        done += dest.confirm_migration(migration_uuid)
    return done


def revert_move(source: MoveParticipant, dest: MoveParticipant, migration_uuid: str) -> list[str]:
    """The destination lets go of the new side first, then the source takes the instance back."""
    done = dest.revert_migration(migration_uuid)
    if not _same_host(source, dest):
        done += source.revert_migration(migration_uuid)
    return done


def evacuate(dest: MoveParticipant, instance: InstanceSpec, migration_uuid: str, source_host: str) -> Claim:
    """Claim on ``dest`` for an instance whose host is down; the source cleans up when it returns."""
    return dest.evacuate_claim(instance, migration_uuid, source_host)
