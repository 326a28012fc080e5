"""The resource tracker of one host: claims taken under a lock, written to Placement and to its store.

Every operation follows the same three steps, so that a crash at any point is recoverable:

1. under the host's lock, fit the request against the provider tree and the usage summed from the
   persisted claims, and write the claim to the local store marked with the operation in progress
   (``pending_op``);
2. write the consumer's allocations to Placement: one request for all consumers involved (POST
   /allocations with consumer generations, re-read and retried on a generation conflict);
3. clear the mark (or delete the claim when it was being released).

A tracker that restarts finds the marks and finishes the work: a claim whose allocations reached
Placement is kept, one whose allocations did not is dropped, and a release is done again (every
Placement step is written as "make the consumer look like this", so repeating it is harmless).

Moves use a migration consumer.  The source hands over its claim (``begin_move_out``); the destination
fits the request and, in one POST /allocations, gives the instance's source allocations to the
migration consumer and the instance its new allocations (DISK_GB on a sharing provider both hosts use
stays with the instance).  Until the move is confirmed or reverted, the source counts its claim (held
by the migration consumer) and the destination counts the new one.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time

from berth.tracker.claims import (
    ACTIVE,
    INCOMING,
    OUTGOING,
    SHELVED,
    SOFT_DELETED,
    Claim,
    ClaimError,
    ClaimFailed,
    ClaimNotFound,
    ClaimRecord,
    Flavor,
    InstanceSpec,
    InvalidRequest,
    MigrationContext,
    NopClaim,
    SourceContext,
    plan_claim,
    usage_of,
)
from berth.tracker.config import TrackerConfig
from berth.tracker.drivers.base import Driver, ProviderTree
from berth.tracker.placement_client import (
    CapacityExceeded,
    GenerationConflict,
    PlacementClient,
    PlacementError,
    PlacementUnavailable,
    retry_on_conflict,
)
from berth.tracker.store import ClaimStore
from berth.tracker.sync import SyncResult, TreeSync

LOG = logging.getLogger(__name__)

INSTANCE = "INSTANCE"
MIGRATION = "MIGRATION"


class TrackerUnavailable(ClaimError):
    status = 503
    code = "claim.placement_unavailable"


def _clean(allocations) -> dict:
    return {rp: {rc: n for rc, n in res.items() if n} for rp, res in allocations.items() if any(res.values())}


def _contains(allocations, part) -> bool:
    return all(allocations.get(rp, {}).get(rc) == n for rp, res in part.items() for rc, n in res.items())


class ResourceTracker:
    def __init__(
        self,
        host: str,
        driver: Driver,
        placement: PlacementClient,
        config: TrackerConfig | None = None,
        *,
        store: ClaimStore | None = None,
    ):
        self.host = host
        self.driver = driver
        self.placement = placement
        self.config = config or TrackerConfig()
        self.store = store if store is not None else ClaimStore(self.config.store_path(host))
        self.lock = threading.RLock()
        self.tree: ProviderTree | None = None
        self.leftover_providers: set[str] = set()
        self.last_sync: SyncResult | None = None

    # -- life cycle -----------------------------------------------------------------------------

    def start(self) -> dict:
        """Report the host, finish operations a crash interrupted, clean up after evacuations."""
        with self.lock:
            sync = self.update_available_resource()
            recovered = self.recover()
            evacuations = self.cleanup_evacuations()
            return {"sync": sync.to_dict(), "recovered": recovered, "evacuations": evacuations}

    def close(self) -> None:
        self.store.close()

    @property
    def shared_provider(self) -> str | None:
        return self.config.shared_storage.provider_uuid if self.config.shared_storage else None

    def our_providers(self) -> set[str]:
        return self._require_tree().uuids() | self.leftover_providers

    def _require_tree(self) -> ProviderTree:
        if self.tree is None:
            raise TrackerUnavailable(f"{self.host}: the host is not reported yet (update_available_resource)")
        return self.tree

    def _usage(self):
        return usage_of(self.store.all())

    # -- inventory ------------------------------------------------------------------------------

    def update_available_resource(self) -> SyncResult:
        """Push the driver's tree to the service: providers, inventories, traits, parents."""
        with self.lock:
            tree = self.driver.provider_tree(self.host, self.config, self.config.provider_config)
            result = TreeSync(self.placement).sync(tree)
            self.tree = tree
            self.leftover_providers = result.leftover_uuids
            self.store.set_meta("root_provider_uuid", tree.root.uuid)
            self.last_sync = result
            reported = tree.uuids()
            usage = usage_of(self.store.all())
            for node in tree:
                for rc, inventory in node.inventories.items():
                    used = usage.used(node.uuid, rc)
                    if used > inventory.capacity:
                        result.warnings.append(
                            f"{node.name} is over capacity: {used} {rc} claimed, "
                            f"{inventory.capacity} available; new claims are refused"
                        )
            for record in self.store.all():
                lost = set(record.allocations) - reported
                if lost:
                    result.warnings.append(
                        f"claim {record.claim_id} of {record.instance_uuid} uses providers "
                        f"the host no longer reports: {', '.join(sorted(lost))}"
                    )
            if result.changed:
                LOG.info(
                    "%s: provider tree updated: created %s, re-parented %s, removed %s, inventories of %s, "
                    "traits of %s",
                    self.host,
                    result.created,
                    result.reparented,
                    result.removed,
                    result.inventories_updated,
                    result.traits_updated,
                )
            for warning in result.warnings + [f"{n} kept: {why}" for n, why in result.kept.items()]:
                LOG.warning("%s: %s", self.host, warning)
            return result

    # -- Placement writes -----------------------------------------------------------------------

    def _rewrite(self, consumers, desired_fn, *, owner, what) -> None:
        """Make the consumers' allocations what ``desired_fn(states)`` says, in one POST /allocations.

        ``desired_fn`` gets fresh ``ConsumerState`` objects on every attempt and returns
        {consumer: (allocations, consumer_type)}; consumers it leaves out are not written.
        """

        def attempt():
            states = {uuid: self.placement.consumer(uuid) for uuid in consumers}
            writes = {}
            for uuid, (allocations, consumer_type) in desired_fn(states).items():
                state = states[uuid]
                allocations = _clean(allocations)
                if allocations == _clean(state.allocations):
                    continue
                known_type = state.consumer_type if state.consumer_type in (INSTANCE, MIGRATION) else None
                writes[uuid] = {
                    "allocations": allocations,
                    "generation": state.generation,
                    "project_id": state.project_id or owner[0],
                    "user_id": state.user_id or owner[1],
                    "consumer_type": consumer_type or known_type or INSTANCE,
                }
            if writes:
                self.placement.write_consumers(writes)

        retry_on_conflict(attempt, what=what)

    def _land(self, record: ClaimRecord, consumers, desired_fn) -> ClaimRecord:
        """Step 2 and 3 of a claim: write it to Placement, then clear its mark (or drop it)."""
        owner = (record.project_id, record.user_id)
        try:
            self._rewrite(consumers, desired_fn, owner=owner, what=f"claim of {record.instance_uuid}")
        except CapacityExceeded as e:
            self.store.delete(record.claim_id)
            raise ClaimFailed([f"Placement: {e.detail}"]) from None
        except ClaimError:
            self.store.delete(record.claim_id)
            raise
        except PlacementUnavailable as e:
            # The outcome is unknown: look again if the service answers, else leave it to recovery.
            with contextlib.suppress(PlacementError):
                self._settle_claim(record)
            raise TrackerUnavailable(f"Placement did not answer: {e.detail}") from None
        except (GenerationConflict, PlacementError) as e:
            self.store.delete(record.claim_id)
            raise ClaimError(f"Placement refused the claim: {e}") from None
        return self.store.update(record, pending_op=None)

    def _run(self, record: ClaimRecord, op: str, **changes):
        """Mark ``record`` with ``op`` in the store, then do ``op`` (which ends by unmarking or deleting)."""
        record = self.store.update(record, pending_op=op, **changes)
        return self._OPS[op](self, record)

    # -- the operations a mark names (each one safe to repeat) ---------------------------------

    def _settle_claim(self, record: ClaimRecord) -> str:
        """A claim that may or may not have reached Placement: keep it if it did, drop it if not."""
        instance = self.placement.consumer(record.instance_uuid)
        landed = bool(record.allocations) and instance.on(self.our_providers()) == record.allocations
        if record.state == INCOMING:
            landed = landed and bool(self.placement.consumer(record.migration_uuid).allocations)
        if landed:
            self.store.update(record, pending_op=None)
            return "kept"
        self.store.delete(record.claim_id)
        return "dropped"

    def _apply_release(self, record: ClaimRecord) -> str:
        """The instance gives back what it holds of this host (and its shared disk)."""
        ours = self.our_providers() | set(record.shared_allocations)
        consumer = record.consumer_uuid
        self._rewrite(
            [consumer],
            lambda s: {consumer: (s[consumer].outside(ours), None)},
            owner=(record.project_id, record.user_id),
            what=f"release of {record.instance_uuid}",
        )
        self.store.delete(record.claim_id)
        return "released"

    def _apply_delete(self, record: ClaimRecord) -> str:
        """The instance is gone: it and its migration hold nothing anywhere."""
        consumers = [record.instance_uuid] + ([record.migration_uuid] if record.migration_uuid else [])
        self._rewrite(
            consumers,
            lambda s: {c: ({}, None) for c in consumers},
            owner=(record.project_id, record.user_id),
            what=f"delete of {record.instance_uuid}",
        )
        self.store.delete(record.claim_id)
        return "deleted"

    def _apply_revert_in(self, record: ClaimRecord) -> str:
        """Destination side of a revert: the instance takes back what the migration held."""
        instance, migration = record.instance_uuid, record.migration_uuid
        old_shared = record.migration_context.old_shared if record.migration_context else {}

        def desired(s):
            held = s[migration].allocations
            if not held:
                return {}  # swapped back already (by the source), or never swapped
            return {instance: ({**held, **old_shared}, INSTANCE), migration: ({}, MIGRATION)}

        self._rewrite(
            [instance, migration], desired, owner=(record.project_id, record.user_id), what=f"revert of {migration}"
        )
        self.store.delete(record.claim_id)
        return "reverted"

    def _apply_confirm_out(self, record: ClaimRecord) -> str:
        """Source side of a confirm: the migration consumer's hold on this host ends."""
        migration = record.migration_uuid
        self._rewrite(
            [migration],
            lambda s: {migration: ({}, MIGRATION)},
            owner=(record.project_id, record.user_id),
            what=f"confirm of {migration}",
        )
        self.store.delete(record.claim_id)
        return "confirmed"

    def _apply_revert_out(self, record: ClaimRecord) -> str:
        """Source side of a revert: the claim is the instance's again (swapping back if still needed)."""
        instance, migration = record.instance_uuid, record.migration_uuid

        def desired(s):
            held = s[migration].allocations
            if not held:
                return {}
            return {instance: ({**held, **record.shared_allocations}, INSTANCE), migration: ({}, MIGRATION)}

        self._rewrite(
            [instance, migration], desired, owner=(record.project_id, record.user_id), what=f"revert of {migration}"
        )
        self.store.update(record, state=ACTIVE, consumer_uuid=instance, migration_uuid=None, pending_op=None)
        return "restored"

    def _apply_evacuated(self, record: ClaimRecord) -> str:
        """Source side after an evacuation: the migration consumer's hold ends, the claim is forgotten."""
        migration = record.migration_uuid
        if migration:
            self._rewrite(
                [migration],
                lambda s: {migration: ({}, MIGRATION)},
                owner=(record.project_id, record.user_id),
                what=f"evacuation cleanup {migration}",
            )
        self.store.delete(record.claim_id)
        return "cleaned"

    def _apply_forget(self, record: ClaimRecord) -> str:
        self.store.delete(record.claim_id)
        return "forgotten"

    _OPS = {
        "claim": _settle_claim,
        "release": _apply_release,
        "delete": _apply_delete,
        "revert_in": _apply_revert_in,
        "confirm_out": _apply_confirm_out,
        "revert_out": _apply_revert_out,
        "evacuated": _apply_evacuated,
        "forget": _apply_forget,
    }

    def recover(self) -> list[dict]:
        """Finish every operation a crash interrupted."""
        with self.lock:
            done = []
            for record in self.store.pending():
                outcome = self._OPS[record.pending_op](self, record)
                LOG.info("%s: recovered %s of claim %s: %s", self.host, record.pending_op, record.claim_id, outcome)
                done.append(
                    {
                        "claim_id": record.claim_id,
                        "instance_uuid": record.instance_uuid,
                        "op": record.pending_op,
                        "outcome": outcome,
                    }
                )
            return done

    # -- claims ---------------------------------------------------------------------------------

    def instance_claim(self, instance: InstanceSpec) -> Claim:
        """Claim a new instance's resources on this host (build, unshelve after offload)."""
        with self.lock:
            tree = self._require_tree()
            existing = self.store.for_instance(instance.uuid)
            if existing:
                raise ClaimError(
                    f"instance {instance.uuid} already has a claim on {self.host} "
                    f"({', '.join(r.state for r in existing)})"
                )
            plan = plan_claim(instance.flavor, tree, self._usage(), shared_provider=self.shared_provider)
            record = self.store.add(
                ClaimRecord.new(
                    host=self.host,
                    instance_uuid=instance.uuid,
                    consumer_uuid=instance.uuid,
                    kind="instance",
                    state=ACTIVE,
                    project_id=instance.project_id,
                    user_id=instance.user_id,
                    flavor=instance.flavor,
                    allocations=plan.allocations,
                    shared_allocations=plan.shared,
                    numa=plan.numa,
                    pci=plan.pci,
                    pending_op="claim",
                )
            )
            ours = self.our_providers() | set(plan.shared)

            def desired(s):
                elsewhere = s[instance.uuid].outside(ours)
                if elsewhere:
                    raise ClaimError(
                        f"instance {instance.uuid} holds allocations on other providers "
                        f"({', '.join(sorted(elsewhere))}); a move needs a move claim"
                    )
                return {instance.uuid: ({**plan.allocations, **plan.shared}, INSTANCE)}

            return Claim(self._land(record, [instance.uuid], desired), self)

    def begin_move_out(self, instance_uuid: str, migration_uuid: str) -> SourceContext:
        """Source side of a move: hand the instance's claim to the migration and describe it."""
        with self.lock:
            records = self.store.for_instance(instance_uuid)
            for record in records:
                if record.state == OUTGOING and record.migration_uuid == migration_uuid:
                    return self._source_context(record)
            movable = [r for r in records if r.state == ACTIVE and r.pending_op is None]
            if not movable:
                if records:
                    raise ClaimError(
                        f"instance {instance_uuid} cannot move from {self.host} while "
                        f"{', '.join(r.state for r in records)}"
                    )
                raise ClaimNotFound(f"instance {instance_uuid} has no claim on {self.host}")
            record = self.store.update(
                movable[0], state=OUTGOING, migration_uuid=migration_uuid, consumer_uuid=migration_uuid
            )
            return self._source_context(record)

    def _source_context(self, record: ClaimRecord) -> SourceContext:
        return SourceContext(
            host=self.host,
            instance_uuid=record.instance_uuid,
            migration_uuid=record.migration_uuid,
            flavor=record.flavor,
            allocations=record.allocations,
            shared_allocations=record.shared_allocations,
            numa=record.numa,
            pci=record.pci,
            project_id=record.project_id,
            user_id=record.user_id,
        )

    def resize_claim(
        self, instance: InstanceSpec, new_flavor: Flavor, migration_uuid: str, source: SourceContext
    ) -> Claim:
        """Destination side of a resize or cold migration (the same host is allowed)."""
        return self._move_claim("resize", instance, new_flavor, migration_uuid, source.host, source)

    def live_migration_claim(self, instance: InstanceSpec, migration_uuid: str, source: SourceContext) -> Claim:
        """Destination side of a live migration: same flavor, new NUMA cells and PCI devices."""
        if source.host == self.host:
            raise InvalidRequest("a live migration goes to another host")
        return self._move_claim("live_migration", instance, source.flavor, migration_uuid, source.host, source)

    def evacuate_claim(self, instance: InstanceSpec, migration_uuid: str, source_host: str) -> Claim:
        """Destination side of an evacuation: the source is down and hands nothing over."""
        if source_host == self.host:
            raise InvalidRequest("an evacuation goes to another host")
        return self._move_claim("evacuate", instance, instance.flavor, migration_uuid, source_host, None)

    def rebuild_claim(
        self, instance: InstanceSpec, migration_uuid: str | None = None, source_host: str | None = None
    ) -> Claim:
        """Rebuild: nothing to claim on the instance's own host; elsewhere it is an evacuation."""
        with self.lock:
            if any(r.state == ACTIVE for r in self.store.for_instance(instance.uuid)):
                return NopClaim(instance.uuid, self.host)
            if not migration_uuid or not source_host:
                raise InvalidRequest(
                    f"instance {instance.uuid} has no claim on {self.host}: a rebuild here is an "
                    "evacuation and needs migration_uuid and source_host"
                )
            return self.evacuate_claim(instance, migration_uuid, source_host)

    def _move_claim(
        self,
        kind,
        instance: InstanceSpec,
        flavor: Flavor,
        migration_uuid: str,
        source_host: str,
        source: SourceContext | None,
    ) -> Claim:
        with self.lock:
            for record in self.store.for_migration(migration_uuid):
                if record.state == INCOMING:
                    if record.instance_uuid != instance.uuid:
                        raise InvalidRequest(f"migration {migration_uuid} belongs to {record.instance_uuid}")
                    return Claim(record, self)
            if source is not None and (
                source.instance_uuid != instance.uuid or source.migration_uuid != migration_uuid
            ):
                raise InvalidRequest("the source context is for another instance or migration")
            if migration_uuid == instance.uuid:
                raise InvalidRequest("a migration needs a uuid of its own")
            here = [
                r
                for r in self.store.for_instance(instance.uuid)
                if not (r.state == OUTGOING and r.migration_uuid == migration_uuid)
            ]
            if here:
                raise ClaimError(
                    f"instance {instance.uuid} already has a claim on {self.host} ({', '.join(r.state for r in here)})"
                )
            tree = self._require_tree()
            plan = plan_claim(flavor, tree, self._usage(), shared_provider=self.shared_provider)
            ours = self.our_providers()
            same_host = source_host == self.host

            def split(current):
                """(what the migration consumer takes, what stays with the instance on sharing providers)."""
                kept = {rp: dict(res) for rp, res in current.allocations.items() if rp == self.shared_provider}
                moved = {rp: dict(res) for rp, res in current.allocations.items() if rp not in kept}
                return moved, kept

            before = self.placement.consumer(instance.uuid)
            moved, kept = split(before)
            context = MigrationContext(
                migration_uuid=migration_uuid,
                kind=kind,
                source_host=source_host,
                dest_host=self.host,
                old_flavor=source.flavor if source else instance.flavor,
                new_flavor=flavor,
                old_numa=source.numa if source else (),
                new_numa=plan.numa,
                old_pci=source.pci if source else (),
                new_pci=plan.pci,
                old_allocations=moved,
                old_shared=kept,
            )
            record = self.store.add(
                ClaimRecord.new(
                    host=self.host,
                    instance_uuid=instance.uuid,
                    consumer_uuid=instance.uuid,
                    kind=kind,
                    state=INCOMING,
                    project_id=instance.project_id,
                    user_id=instance.user_id,
                    flavor=flavor,
                    allocations=plan.allocations,
                    shared_allocations=plan.shared,
                    numa=plan.numa,
                    pci=plan.pci,
                    migration_uuid=migration_uuid,
                    migration_context=context,
                    pending_op="claim",
                )
            )

            def desired(s):
                if s[migration_uuid].allocations:
                    raise ClaimError(f"migration {migration_uuid} already holds allocations")
                moved, _ = split(s[instance.uuid])
                if not moved:
                    raise ClaimError(f"instance {instance.uuid} holds no allocations to move")
                if source is not None and not _contains(s[instance.uuid].allocations, source.allocations):
                    raise ClaimError(
                        f"the allocations of {instance.uuid} in Placement are not the ones the "
                        f"source {source.host} claimed"
                    )
                if not same_host and set(moved) & ours:
                    raise ClaimError(f"instance {instance.uuid} already holds allocations on {self.host}")
                return {
                    migration_uuid: (moved, MIGRATION),
                    instance.uuid: ({**plan.allocations, **plan.shared}, INSTANCE),
                }

            return Claim(self._land(record, [instance.uuid, migration_uuid], desired), self)

    # -- ending moves ---------------------------------------------------------------------------

    def confirm_migration(self, migration_uuid: str) -> list[str]:
        """Keep the move: the source's side is dropped, the destination's claim becomes the instance's."""
        with self.lock:
            records = self.store.for_migration(migration_uuid)
            done = []
            incoming = [r for r in records if r.state == INCOMING]
            for record in (r for r in records if r.state == OUTGOING):
                if (
                    not incoming
                    and not self.placement.consumer(migration_uuid).allocations
                    and self.placement.consumer(record.instance_uuid).on(self.our_providers()) == record.allocations
                ):
                    raise ClaimError(f"migration {migration_uuid} never reached its destination: revert it")
                done.append(self._run(record, "confirm_out"))
            for record in incoming:
                self.store.update(record, state=ACTIVE, migration_uuid=None, migration_context=None)
                done.append("finished")
            return done

    def revert_migration(self, migration_uuid: str) -> list[str]:
        """Undo the move: the destination lets go, the source's claim is the instance's again."""
        with self.lock:
            records = self.store.for_migration(migration_uuid)
            done = [self._run(r, "revert_in") for r in records if r.state == INCOMING]
            done += [self._run(r, "revert_out") for r in records if r.state == OUTGOING]
            return done

    def drop_move_claim(self, migration_uuid: str) -> str | None:
        """Release this host's side of a move: the old side on the source (confirm), the new on the
        destination (revert)."""
        with self.lock:
            records = self.store.for_migration(migration_uuid)
            outgoing = [r for r in records if r.state == OUTGOING]
            if outgoing:
                return self._run(outgoing[0], "confirm_out")
            incoming = [r for r in records if r.state == INCOMING]
            if incoming:
                return self._run(incoming[0], "revert_in")
            return None

    def abort(self, claim_id: str) -> str | None:
        """Undo a claim: free an instance claim, swap a move claim back."""
        with self.lock:
            record = self.store.get(claim_id)
            if record is None:
                return None
            if record.state == INCOMING:
                return self._run(record, "revert_in")
            if record.state == OUTGOING:
                return self._run(record, "revert_out")
            return self._run(record, "release")

    # -- instance life cycle --------------------------------------------------------------------

    def delete_instance(self, instance_uuid: str) -> list[str]:
        """Delete (or hard delete): free everything the instance and its migrations hold."""
        with self.lock:
            return [self._run(r, "delete") for r in self.store.for_instance(instance_uuid)]

    def _set_state(self, instance_uuid: str, allowed: tuple, state: str) -> list[Claim]:
        with self.lock:
            records = self.store.for_instance(instance_uuid)
            if not records:
                raise ClaimNotFound(f"instance {instance_uuid} has no claim on {self.host}")
            blocked = [r for r in records if r.state not in allowed and r.state != state]
            if blocked:
                raise ClaimError(
                    f"instance {instance_uuid} is {blocked[0].state} on {self.host}; it cannot become {state}"
                )
            return [
                Claim(self.store.update(r, state=state), self) if r.state != state else Claim(r, self) for r in records
            ]

    def soft_delete_instance(self, instance_uuid: str) -> list[Claim]:
        """Soft delete keeps the claims until a hard delete or the reclaim period."""
        return self._set_state(instance_uuid, (ACTIVE,), SOFT_DELETED)

    def restore_instance(self, instance_uuid: str) -> list[Claim]:
        return self._set_state(instance_uuid, (SOFT_DELETED,), ACTIVE)

    def reclaim_soft_deleted(self, older_than: float | None = None) -> list[str]:
        """Free soft-deleted instances older than ``older_than`` seconds (default: the configured period)."""
        period = self.config.audit.reclaim_instance_interval if older_than is None else older_than
        if older_than is None and period <= 0:
            return []
        with self.lock:
            cutoff = time.time() - period
            reclaimed = []
            for record in self.store.all():
                if record.state == SOFT_DELETED and record.state_changed_at <= cutoff:
                    self._run(record, "release")
                    reclaimed.append(record.instance_uuid)
            return reclaimed

    def shelve_instance(self, instance_uuid: str) -> list[Claim]:
        """Shelve keeps the claims: the instance stays on the host until offloaded."""
        return self._set_state(instance_uuid, (ACTIVE,), SHELVED)

    def shelve_offload_instance(self, instance_uuid: str) -> list[str]:
        """Offload frees everything; unshelving claims again, on whatever host is chosen."""
        with self.lock:
            records = self.store.for_instance(instance_uuid)
            moving = [r for r in records if r.state in (INCOMING, OUTGOING)]
            if moving:
                raise ClaimError(f"instance {instance_uuid} is moving; it cannot be offloaded")
            return [self._run(r, "release") for r in records]

    def unshelve_claim(self, instance: InstanceSpec) -> Claim:
        """Unshelve: a shelved (not offloaded) instance keeps its claim; an offloaded one claims anew."""
        with self.lock:
            shelved = [r for r in self.store.for_instance(instance.uuid) if r.state == SHELVED]
            if shelved:
                return Claim(self.store.update(shelved[0], state=ACTIVE), self)
            return self.instance_claim(instance)

    # -- evacuation, source side ----------------------------------------------------------------

    def cleanup_evacuated(self, instance_uuid: str, migration_uuid: str) -> list[str]:
        """The instance was evacuated away while this host was down: drop what is left here."""
        with self.lock:
            records = [r for r in self.store.for_instance(instance_uuid) if r.state != INCOMING]
            if records:
                return [self._run(r, "evacuated", migration_uuid=migration_uuid) for r in records]
            held = self.placement.consumer(migration_uuid)
            if held.consumer_type == MIGRATION and set(held.allocations) & self.our_providers():
                self._rewrite(
                    [migration_uuid],
                    lambda s: {migration_uuid: ({}, MIGRATION)},
                    owner=("", ""),
                    what=f"evacuation cleanup {migration_uuid}",
                )
                return ["cleaned"]
            return []

    def placement_snapshot(self) -> dict[str, dict[str, dict[str, int]]]:
        """consumer -> provider -> class -> amount, over this host's providers, as Placement has them."""
        held: dict[str, dict] = {}
        # Only providers with inventory can hold allocations (NUMA cells have none).
        holders = {n.uuid for n in self._require_tree() if n.inventories} | self.leftover_providers
        for rp in holders:
            for consumer, resources in self.placement.provider_allocations(rp).items():
                held.setdefault(consumer, {})[rp] = resources
        return held

    def cleanup_evacuations(self, snapshot=None) -> list[dict]:
        """Find instances evacuated while this host was down and clean up after them.

        An instance whose allocations now lie entirely on other providers was moved without this host
        taking part; the migration consumer holding exactly this claim's allocations here is the
        evacuation's (Placement keeps no link between the two, so the match is by amounts).
        """
        with self.lock:
            records = [
                r for r in self.store.all() if r.state in (ACTIVE, SHELVED, SOFT_DELETED) and r.pending_op is None
            ]
            if not records:
                return []
            snapshot = self.placement_snapshot() if snapshot is None else snapshot
            absent = [r for r in records if r.consumer_uuid not in snapshot]
            if not absent:
                return []
            ours = self.our_providers()
            everyone = self.store.all()
            known = {r.consumer_uuid for r in everyone} | {r.instance_uuid for r in everyone}
            strangers = {c: None for c in snapshot if c not in known}
            cleaned = []
            for record in absent:
                state = self.placement.consumer(record.instance_uuid)
                if not state.allocations or state.on(ours):
                    continue  # lost allocations, not a move: the audit reports it
                match = None
                for consumer in strangers:
                    if strangers[consumer] is None:
                        strangers[consumer] = self.placement.consumer(consumer)
                    other = strangers[consumer]
                    if (
                        other is not False
                        and other.consumer_type == MIGRATION
                        and other.on(ours) == record.allocations
                        and other.project_id == record.project_id
                    ):
                        match = consumer
                        strangers[consumer] = False  # matched once only
                        break
                if match is not None:
                    self._run(record, "evacuated", migration_uuid=match)
                else:
                    self._run(record, "forget")
                LOG.info(
                    "%s: instance %s was evacuated while this host was down; cleaned up (migration %s)",
                    self.host,
                    record.instance_uuid,
                    match,
                )
                cleaned.append({"instance_uuid": record.instance_uuid, "migration_uuid": match})
            return cleaned

    # -- reading the books ----------------------------------------------------------------------

    def claims_for_instance(self, instance_uuid: str) -> list[Claim]:
        return [Claim(r, self) for r in self.store.for_instance(instance_uuid)]

    def claims_for_host(self, host: str) -> list[Claim]:
        return [Claim(r, self) for r in self.store.for_host(host)]

    def get_claim(self, claim_id: str) -> Claim:
        record = self.store.get(claim_id)
        if record is None:
            raise ClaimNotFound(f"no claim {claim_id} on {self.host}")
        return Claim(record, self)

    def capacity(self) -> dict:
        """The host as the tracker sees it: inventories, usage from claims, NUMA cells, PCI slots."""
        with self.lock:
            tree = self._require_tree()
            records = self.store.all()
            usage = usage_of(records)
            providers = {}
            for node in tree:
                inventories = {}
                for rc, inv in node.inventories.items():
                    used = usage.used(node.uuid, rc)
                    inventories[rc] = {
                        **inv.as_placement(),
                        "capacity": inv.capacity,
                        "used": used,
                        "free": inv.capacity - used,
                    }
                providers[node.uuid] = {
                    "name": node.name,
                    "kind": node.kind,
                    "parent_uuid": tree.get(node.parent).uuid if node.parent else None,
                    "inventories": inventories,
                    "traits": sorted(node.traits),
                }
            vcpu = tree.root.inventories.get("VCPU")
            memory = tree.root.inventories.get("MEMORY_MB")
            cells = []
            for cell in tree.cells:
                cells.append(
                    {
                        "id": cell.id,
                        "shared_cpus": sorted(cell.shared_cpus),
                        "dedicated_cpus": sorted(cell.dedicated_cpus),
                        "memory_mb": cell.memory_mb,
                        "vcpus_capacity": int(len(cell.shared_cpus) * (vcpu.allocation_ratio if vcpu else 1.0)),
                        "vcpus_used": usage.cell_vcpus[cell.id],
                        "memory_capacity": int(cell.memory_mb * (memory.allocation_ratio if memory else 1.0)),
                        "memory_used": usage.cell_memory[cell.id],
                        "pinned_cpus": sorted(usage.pinned.get(cell.id, ())),
                    }
                )
            pci = []
            for node in tree.pci_providers:
                pci.append(
                    {
                        "provider_uuid": node.uuid,
                        "device": node.pci.address,
                        "numa_node": node.pci.numa_node,
                        "resource_class": node.pci.resource_class,
                        "vendor_id": node.pci.vendor_id,
                        "product_id": node.pci.product_id,
                        "slots": {slot: usage.pci.get(slot) for slot in node.pci.slots},
                    }
                )
            classes = {}
            if self.config.provider_config is not None:
                classes = {
                    name: {"units": info.units, "description": info.description}
                    for name, info in self.config.provider_config.resource_classes.items()
                }
            return {
                "host": self.host,
                "root_provider_uuid": tree.root.uuid,
                "providers": providers,
                "cells": cells,
                "pci": pci,
                "resource_classes": classes,
                "shared_storage": self.shared_provider,
                "claims": len(records),
            }

    # -- audit ----------------------------------------------------------------------------------

    def audit(self, heal: bool | None = None):
        """Compare claims, Placement and the hypervisor; heal when asked (or configured) to."""
        from berth.tracker.audit import run_audit

        with self.lock:
            return run_audit(self, heal=self.config.audit.heal if heal is None else heal)

    def periodic(self) -> dict:
        """What the agent runs every audit interval."""
        with self.lock:
            sync = self.update_available_resource()
            report = self.audit()
            reclaimed = self.reclaim_soft_deleted()
            return {"sync": sync.to_dict(), "audit": report.to_dict(), "reclaimed": reclaimed}
