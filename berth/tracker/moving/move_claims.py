"""The destination's claim of a move: resize, cold or live migration, evacuation.

The destination fits the new flavor and, in one ``POST /allocations``, gives the instance's source
allocations to the migration consumer (``consumer_type: MIGRATION``, so they stay counted on the
source) and the instance its new allocations. DISK_GB on a sharing provider stays with the
instance. The claim is ``incoming`` and carries a ``MigrationContext``: both flavors, both sides'
NUMA cells and PCI devices, what the migration consumer holds and the shared disk the instance had.
The handover depends on what the instance held when it began, so a retry after a lost answer
checks for its own finished write before anything else (``_handover``).
"""

from __future__ import annotations

from dataclasses import dataclass

from berth.clients.errors import ClaimError, InvalidRequest
from berth.clients.placement import ConsumerState
from berth.domain.host import allocations
from berth.domain.host.allocations import Allocations
from berth.domain.host.claims import Claim
from berth.domain.host.fitting import Plan
from berth.domain.host.records import (
    INCOMING,
    INSTANCE,
    MIGRATION,
    OUTGOING,
    ClaimRecord,
    MigrationContext,
    SourceContext,
)
from berth.domain.host.request import Flavor, InstanceSpec
from berth.tracker.consumer_writer import Desired, DesiredFn
from berth.tracker.host_parts import HostParts
from berth.tracker.recovery import PendingOp


@dataclass(frozen=True)
class MoveRequest:
    kind: str  # "resize", "live_migration" or "evacuate"
    instance: InstanceSpec
    flavor: Flavor  # the flavor on the destination
    migration_uuid: str
    source_host: str
    source: SourceContext | None  # None for an evacuation: the source is down and hands nothing over


def claim(tracker: HostParts, move: MoveRequest) -> Claim:
    """Claim ``move`` on ``tracker``'s host (under its lock); asked again, the same claim is returned."""
    existing = _existing_claim(tracker, move)
    if existing is not None:
        return Claim(existing, tracker)
    _check(tracker, move)
    tracker.check_group(move.instance)
    plan = tracker.plan(move.flavor)
    # Both consumers read once: what the migration takes, and the states the write starts from.
    consumers = [move.instance.uuid, move.migration_uuid]
    states = {uuid: tracker.placement.consumer(uuid) for uuid in consumers}
    moved, kept = _split(states[move.instance.uuid], tracker.shared_provider)
    record = tracker.store.add(_incoming_record(tracker.host, move, plan, moved, kept))
    desired = _handover(tracker, move, plan, moved)
    return Claim(tracker.land(record, consumers, desired, known=states), tracker)


def _existing_claim(tracker: HostParts, move: MoveRequest) -> ClaimRecord | None:
    for record in tracker.store.for_migration(move.migration_uuid):
        if record.state == INCOMING:
            if record.instance_uuid != move.instance.uuid:
                raise InvalidRequest(f"migration {move.migration_uuid} belongs to {record.instance_uuid}")
            return record
    return None


def _check(tracker: HostParts, move: MoveRequest) -> None:
    instance = move.instance
    if move.source is not None and (
        move.source.instance_uuid != instance.uuid or move.source.migration_uuid != move.migration_uuid
    ):
        raise InvalidRequest("the source context is for another instance or migration")
    if move.migration_uuid == instance.uuid:
        raise InvalidRequest("a migration needs a uuid of its own")
    here = [
        r
        for r in tracker.store.for_instance(instance.uuid)
        if not (r.state == OUTGOING and r.migration_uuid == move.migration_uuid)
    ]
    if here:
        raise ClaimError(
            f"instance {instance.uuid} already has a claim on {tracker.host} ({', '.join(r.state for r in here)})"
        )


def _split(current: ConsumerState, shared_provider: str | None) -> tuple[Allocations, Allocations]:
    """(what the migration consumer takes, what stays with the instance on the sharing provider)."""
    kept = {rp: dict(res) for rp, res in current.allocations.items() if rp == shared_provider}
    return allocations.outside(current.allocations, kept), kept


def _incoming_record(host: str, move: MoveRequest, plan: Plan, moved: Allocations, kept: Allocations) -> ClaimRecord:
    instance, source = move.instance, move.source
    context = MigrationContext(
        migration_uuid=move.migration_uuid,
        kind=move.kind,
        source_host=move.source_host,
        dest_host=host,
        old_flavor=source.flavor if source else instance.flavor,
        new_flavor=move.flavor,
        old_numa=source.numa if source else (),
        new_numa=plan.numa,
        old_pci=source.pci if source else (),
        new_pci=plan.pci,
        old_allocations=moved,
        old_shared=kept,
    )
    return ClaimRecord.new(
        host=host,
        instance_uuid=instance.uuid,
        consumer_uuid=instance.uuid,
        kind=move.kind,
        state=INCOMING,
        project_id=instance.project_id,
        user_id=instance.user_id,
        flavor=move.flavor,
        allocations=plan.allocations,
        shared_allocations=plan.shared,
        numa=plan.numa,
        pci=plan.pci,
        migration_uuid=move.migration_uuid,
        anti_affinity_group=instance.anti_affinity.uuid if instance.anti_affinity else None,
        migration_context=context,
        pending_op=PendingOp.CLAIM.value,
    )


def _handover(tracker: HostParts, move: MoveRequest, plan: Plan, moved_before: Allocations) -> DesiredFn:
    """The one write of the move: the migration takes the instance's old allocations (``moved_before``
    when the claim began), the instance its new."""
    instance, migration, source = move.instance.uuid, move.migration_uuid, move.source
    ours, shared_provider = tracker.our_providers(), tracker.shared_provider
    same_host = move.source_host == tracker.host
    done: Desired = {migration: (moved_before, MIGRATION), instance: ({**plan.allocations, **plan.shared}, INSTANCE)}

    def desired(s: dict[str, ConsumerState]) -> Desired:
        if s[migration].allocations:
            # This very write, made by an earlier attempt whose answer was lost (the service's
            # worker killed under it, say): the retry finds it done, and there is nothing to write.
            if all(allocations.clean(s[c].allocations) == allocations.clean(wanted) for c, (wanted, _) in done.items()):
                return done
            raise ClaimError(f"migration {migration} already holds allocations")
        moved, _ = _split(s[instance], shared_provider)
        if not moved:
            raise ClaimError(f"instance {instance} holds no allocations to move")
        if source is not None and not allocations.contains(s[instance].allocations, source.allocations):
            raise ClaimError(
                f"the allocations of {instance} in Placement are not the ones the source {source.host} claimed"
            )
        if not same_host and set(moved) & ours:
            raise ClaimError(f"instance {instance} already holds allocations on {tracker.host}")
        return {migration: (moved, MIGRATION), instance: ({**plan.allocations, **plan.shared}, INSTANCE)}

    return desired
