"""The resource tracker of one host: claims taken under a lock, written to Placement and to its store.

Every operation follows the same three steps, so that a crash at any point is recoverable:

1. under the host's lock, fit the request against the provider tree and the usage summed from the
   persisted claims, and write the claim to the local store marked with the operation in progress
   (``pending_op``);
2. write the consumer's allocations to Placement: one request for all consumers involved (POST
   /allocations with consumer generations, re-read and retried on a generation conflict);
3. clear the mark (or delete the claim when it was being released).

A new instance's claim whose allocations the scheduler's claim wrote already, just as this host
plans them (the conductor says what it wrote), has nothing to write: it is recorded unmarked.

``berth.tracker.recovery`` holds the operations a mark names and settles the marks a crash left.
Moves use a migration consumer: the source hands over its claim (``begin_move_out``), the
destination claims (``berth.tracker.moving.move_claims``); ``berth.tracker.moving.moves`` drives both sides.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid as uuidlib
from collections.abc import Collection, Mapping
from typing import Any

from berth.clients.errors import (
    CapacityExceeded,
    ClaimError,
    ClaimFailed,
    ClaimNotFound,
    ClaimStateError,
    InvalidRequest,
    PlacementError,
    PlacementUnavailable,
    TrackerUnavailable,
)
from berth.clients.placement import ConsumerState, PlacementClient
from berth.domain.host import allocations
from berth.domain.host.allocations import Allocations, ByConsumer
from berth.domain.host.claims import Claim, NopClaim
from berth.domain.host.fitting import Plan, plan_claim
from berth.domain.host.names import host_name_problem
from berth.domain.host.records import (
    ACTIVE,
    INCOMING,
    INSTANCE,
    MIGRATION,
    MOVING,
    OUTGOING,
    SHELVED,
    SOFT_DELETED,
    ClaimRecord,
    SourceContext,
)
from berth.domain.host.request import Flavor, InstanceSpec
from berth.domain.host.snapshot import HostSnapshot
from berth.domain.host.tree import ProviderTree
from berth.domain.host.usage import HostUsage, usage_of
from berth.tracker.auditing.audit import AuditReport, run_audit
from berth.tracker.capacity_report import capacity_report, shrink_warnings
from berth.tracker.configuration.config import TrackerConfig
from berth.tracker.consumer_writer import ConsumerWriter, Desired, DesiredFn
from berth.tracker.drivers.base import Driver
from berth.tracker.errors import ConfigError, host_model_refusals
from berth.tracker.moving import evacuation, move_claims
from berth.tracker.recovery import PendingOp, PendingOperations
from berth.tracker.store import ClaimStore
from berth.tracker.sync import SyncResult, TreeSync

__all__ = ["ResourceTracker"]

LOG = logging.getLogger(__name__)


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
        problem = host_name_problem(host)
        if problem is not None:
            raise ConfigError(f"host {host!r}: {problem}")
        self.host = host
        self.driver = driver
        self.placement = placement
        self.config = config or TrackerConfig()
        self.store = store if store is not None else ClaimStore(self.config.store_path(host))
        self.driver.keep_state_beside(self.store.path)
        self.lock = threading.RLock()
        self.tree: ProviderTree | None = None
        self.leftover_providers: set[str] = set()
        self.last_sync: SyncResult | None = None
        self.writer = ConsumerWriter(placement)
        self.operations = PendingOperations(host, self.store, placement, self.writer, self.our_providers)

    # -- life cycle -----------------------------------------------------------------------------

    def start(self) -> dict[str, Any]:
        """Report the host, finish operations a crash interrupted, clean up after evacuations."""
        with self.lock:
            sync = self.update_available_resource()
            recovered = self.recover()
            evacuations = self.cleanup_evacuations()
            return {"sync": sync.to_dict(), "recovered": recovered, "evacuations": evacuations}

    def close(self) -> None:
        self.store.close()

    def recover(self) -> list[dict[str, str]]:
        """Finish every operation a crash interrupted (``berth.tracker.recovery``)."""
        with self.lock:
            return self.operations.recover()

    # -- what this host is ------------------------------------------------------------------------

    @property
    def shared_provider(self) -> str | None:
        """The sharing provider new claims put their disk on, if the host uses shared storage."""
        return self.config.shared_storage.provider_uuid if self.config.shared_storage else None

    def sharing_providers(self) -> set[str]:
        """The sharing providers this host's claims use (or will): the configured one and any a claim names."""
        pools = {self.shared_provider} if self.shared_provider else set()
        for record in self.store.all():
            pools.update(record.shared_allocations)
            if record.migration_context is not None:
                pools.update(record.migration_context.old_shared)
        return pools

    def our_providers(self) -> set[str]:
        """The host's own providers: its tree, and providers it no longer reports that still hold claims."""
        return self.require_tree().uuids() | self.leftover_providers

    def require_tree(self) -> ProviderTree:
        if self.tree is None:
            raise TrackerUnavailable(f"{self.host}: the host is not reported yet (update_available_resource)")
        return self.tree

    def usage(self) -> HostUsage:
        return usage_of(self.store.all())

    def plan(self, flavor: Flavor) -> Plan:
        """Fit ``flavor`` on this host next to the persisted claims (under the lock), or raise
        ``ClaimFailed`` / ``InvalidRequest``."""
        with host_model_refusals():
            return plan_claim(flavor, self.require_tree(), self.usage(), shared_provider=self.shared_provider)

    def host_snapshot(self) -> HostSnapshot:
        """The tree and the claims' usage as ``plan`` sees them, read together under the lock."""
        with self.lock:
            return HostSnapshot.take(
                self.host, self.require_tree(), self.usage(), shared_provider=self.shared_provider, taken_at=time.time()
            )

    # -- inventory ------------------------------------------------------------------------------

    def update_available_resource(self) -> SyncResult:
        """Push the driver's tree to the service: providers, inventories, traits, parents."""
        with self.lock:
            tree = self.driver.provider_tree(self.host, self.config, self.config.provider_config)
            result = TreeSync(self.placement).sync(tree)
            self.tree = tree
            self.leftover_providers = result.leftover_uuids
            self.store.set_meta("root_provider_uuid", tree.root.synced_uuid)
            self.last_sync = result
            result.warnings.extend(shrink_warnings(tree, self.store.all()))
            if result.changed:
                LOG.info("%s: provider tree updated: %s", self.host, result.to_dict())
            for warning in result.warnings + [f"{n} kept: {why}" for n, why in result.kept.items()]:
                LOG.warning("%s: %s", self.host, warning)
            return result

    # -- claims ---------------------------------------------------------------------------------

    def check_group(self, instance: InstanceSpec) -> None:
        """Under the lock: refuse an instance its anti-affinity group keeps off this host
        (``berth.domain.host.anti_affinity``)."""
        if instance.anti_affinity is None:
            return
        refusal = instance.anti_affinity.refusal(instance.uuid, self.store.for_host(self.host))
        if refusal is not None:
            raise ClaimFailed([refusal])

    def land(
        self,
        record: ClaimRecord,
        consumers: list[str],
        desired: DesiredFn,
        known: Mapping[str, ConsumerState] | None = None,
    ) -> ClaimRecord:
        """Steps 2 and 3 of a claim marked in the store: write it to Placement, then clear its mark
        (or drop it when Placement refuses it). ``known``: the consumers as just read (the writer's)."""
        try:
            self.writer.rewrite(
                consumers, desired, owner=record.owner, what=f"claim of {record.instance_uuid}", known=known
            )
        except CapacityExceeded as e:
            self.store.delete(record.claim_id)
            raise ClaimFailed([f"Placement: {e.detail}"]) from None
        except ClaimError:
            self.store.delete(record.claim_id)
            raise
        except PlacementUnavailable as e:
            # The outcome is unknown: look again if the service answers, else leave it to recovery.
            with contextlib.suppress(PlacementError):
                self.operations.settle_claim(record)
            raise TrackerUnavailable(f"Placement did not answer: {e.detail}") from None
        except PlacementError as e:
            self.store.delete(record.claim_id)
            raise ClaimError(f"Placement refused the claim: {e}") from None
        return self.store.update(record, pending_op=None)

    def drop_preempted(self, victims: Collection[str]) -> list[str]:
        """Under the lock: forget the claims of consumers the service's pick preempted to make room
        for a new instance here (their allocations were removed in the service, with the pick's
        claim); the instances whose claims were dropped. A victim that still holds allocations on
        this host's providers in the service was not preempted here, and keeps its claims."""
        dropped = []
        for victim in victims:
            records = [r for r in self.store.for_instance(victim) if r.consumer_uuid == victim]
            if not records:
                continue
            ours = self.our_providers() | {p for r in records for p in r.shared_allocations}
            held = self.placement.consumer(victim).on(ours)
            if held:
                LOG.warning(
                    "%s: %s was named preempted but still holds %s here; its claims are kept",
                    self.host,
                    victim,
                    ", ".join(sorted(held)),
                )
                continue
            for record in records:
                self.operations.run(record, PendingOp.FORGET)
            LOG.info("%s: dropped the claims of %s, preempted", self.host, victim)
            dropped.append(victim)
        return dropped

    def instance_claim(
        self, instance: InstanceSpec, preempted: Collection[str] = (), held: Allocations | None = None
    ) -> Claim:
        """Claim a new instance's resources on this host (build, unshelve after offload).
        ``preempted``: the consumers the service removed to make room for it, whose claims here are
        dropped first (``drop_preempted``). ``held``: all the instance holds in the service, as the
        scheduler's claim wrote it just before; when that is this host's own plan, the claim is in
        the books already and is recorded without reading them (a read would find the same: only
        the instance's own operation writes it meanwhile)."""
        with self.lock:
            self.require_tree()  # an unreported host refuses before anything else is looked at
            self.drop_preempted(preempted)
            existing = self.store.for_instance(instance.uuid)
            if existing:
                raise ClaimError(
                    f"instance {instance.uuid} already has a claim on {self.host} "
                    f"({', '.join(r.state for r in existing)})"
                )
            self.check_group(instance)
            plan = self.plan(instance.flavor)
            wanted = {**plan.allocations, **plan.shared}
            in_books = held is not None and allocations.clean(held) == allocations.clean(wanted)
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
                    pending_op=None if in_books else PendingOp.CLAIM.value,
                    anti_affinity_group=instance.anti_affinity.uuid if instance.anti_affinity else None,
                )
            )
            if in_books:
                return Claim(record, self)
            ours = self.our_providers() | set(plan.shared)

            def desired(s: dict[str, ConsumerState]) -> Desired:
                elsewhere = s[instance.uuid].outside(ours)
                if elsewhere:
                    raise ClaimError(
                        f"instance {instance.uuid} holds allocations on other providers "
                        f"({', '.join(sorted(elsewhere))}); a move needs a move claim"
                    )
                return {instance.uuid: (wanted, INSTANCE)}

            return Claim(self.land(record, [instance.uuid], desired), self)

    # -- moves ----------------------------------------------------------------------------------

    def begin_move_out(self, instance_uuid: str, migration_uuid: str) -> SourceContext:
        """Source side of a move: hand the instance's claim to the migration and describe it."""
        with self.lock:
            records = self.store.for_instance(instance_uuid)
            for record in records:
                if record.state == OUTGOING and record.migration_uuid == migration_uuid:
                    return self._source_context(record)
            self._check_migration_uuid(instance_uuid, migration_uuid)
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

    def _check_migration_uuid(self, instance_uuid: str, migration_uuid: str) -> None:
        """Refuse a migration uuid that is not the move's own: the instance's uuid, or a consumer or
        migration another claim here names. Its revert or confirm would rewrite that consumer (the
        instance's own allocations deleted, another instance's handed to this one). Nor a name that
        is not a uuid as the service writes its consumers' (dashed, lower-case): it refuses other
        names, and keys an undashed or upper-case uuid canonically, where the claim would not find it."""
        if not _canonical_uuid(migration_uuid):
            raise InvalidRequest(f"migration {migration_uuid!r} is not a uuid (8-4-4-4-12 lower-case hex digits)")
        if migration_uuid == instance_uuid:
            raise InvalidRequest("a migration needs a uuid of its own")
        for record in self.store.all():
            if record.instance_uuid != instance_uuid and migration_uuid in (
                record.instance_uuid,
                record.consumer_uuid,
                record.migration_uuid,
            ):
                raise InvalidRequest(
                    f"migration {migration_uuid} is already {record.instance_uuid}'s on {self.host}: "
                    "a migration needs a uuid of its own"
                )

    def _source_context(self, record: ClaimRecord) -> SourceContext:
        return SourceContext(
            host=self.host,
            instance_uuid=record.instance_uuid,
            migration_uuid=record.migration,
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
        move = move_claims.MoveRequest("resize", instance, new_flavor, migration_uuid, source.host, source)
        with self.lock:
            return move_claims.claim(self, move)

    def live_migration_claim(self, instance: InstanceSpec, migration_uuid: str, source: SourceContext) -> Claim:
        """Destination side of a live migration: same flavor, new NUMA cells and PCI devices."""
        if source.host == self.host:
            raise InvalidRequest("a live migration goes to another host")
        move = move_claims.MoveRequest("live_migration", instance, source.flavor, migration_uuid, source.host, source)
        with self.lock:
            return move_claims.claim(self, move)

    def evacuate_claim(self, instance: InstanceSpec, migration_uuid: str, source_host: str) -> Claim:
        """Destination side of an evacuation: the source is down and hands nothing over."""
        if source_host == self.host:
            raise InvalidRequest("an evacuation goes to another host")
        move = move_claims.MoveRequest("evacuate", instance, instance.flavor, migration_uuid, source_host, None)
        with self.lock:
            return move_claims.claim(self, move)

    def rebuild_claim(
        self, instance: InstanceSpec, migration_uuid: str | None = None, source_host: str | None = None
    ) -> Claim | NopClaim:
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

    def confirm_migration(self, migration_uuid: str) -> list[str]:
        """Keep the move: the source's side is dropped, the destination's claim becomes the instance's."""
        with self.lock:
            records = self.store.for_migration(migration_uuid)
            incoming = [r for r in records if r.state == INCOMING]
            done = []
            for record in (r for r in records if r.state == OUTGOING):
                if not incoming and self._never_arrived(record):
                    raise ClaimError(f"migration {migration_uuid} never reached its destination: revert it")
                done.append(self.operations.run(record, PendingOp.CONFIRM_OUT))
            for record in incoming:
                self.store.update(record, state=ACTIVE, migration_uuid=None, migration_context=None)
                done.append("finished")
            return done

    def _never_arrived(self, outgoing: ClaimRecord) -> bool:
        """The instance still holds the source's side and the migration nothing (nothing of a
        migration's: a consumer of another type under its uuid is not this move's): no destination
        claimed."""
        migration = self.placement.consumer(outgoing.migration)
        if migration.allocations and migration.consumer_type == MIGRATION:
            return False
        return self.placement.consumer(outgoing.instance_uuid).on(self.our_providers()) == outgoing.allocations

    def revert_migration(self, migration_uuid: str) -> list[str]:
        """Undo the move: the destination lets go, the source's claim is the instance's again."""
        with self.lock:
            records = self.store.for_migration(migration_uuid)
            done = [self._revert_in(r) for r in records if r.state == INCOMING]
            done += [self.operations.run(r, PendingOp.REVERT_OUT) for r in records if r.state == OUTGOING]
            return done

    def _revert_in(self, incoming: ClaimRecord) -> str:
        """Under the lock: the destination lets go of its side of a move, unless the source has
        confirmed it already (the migration gone, the instance holding this claim's allocations):
        then this claim is all the instance has, and the move can only be confirmed."""
        if incoming.pending_op is None and self._confirmed_by_source(incoming):
            raise ClaimStateError(
                f"migration {incoming.migration} was confirmed on its source {incoming.move.source_host}: "
                f"it cannot be reverted on {self.host}, only confirmed"
            )
        return self.operations.run(incoming, PendingOp.REVERT_IN)

    def _confirmed_by_source(self, incoming: ClaimRecord) -> bool:
        """The migration holds nothing of a migration's and the instance holds this claim's side."""
        migration = self.placement.consumer(incoming.migration)
        if migration.allocations and migration.consumer_type == MIGRATION:
            return False
        return self.placement.consumer(incoming.instance_uuid).on(self.our_providers()) == incoming.allocations

    def drop_move_claim(self, migration_uuid: str) -> str | None:
        """Release this host's side of a move: the old side on the source (confirm), the new on the
        destination (revert)."""
        with self.lock:
            records = self.store.for_migration(migration_uuid)
            outgoing = [r for r in records if r.state == OUTGOING]
            if outgoing:
                return self.operations.run(outgoing[0], PendingOp.CONFIRM_OUT)
            incoming = [r for r in records if r.state == INCOMING]
            if incoming:
                return self._revert_in(incoming[0])
            return None

    def abort(self, claim_id: str) -> str | None:
        """Undo a claim: free an instance claim, swap a move claim back."""
        with self.lock:
            record = self.store.get(claim_id)
            if record is None:
                return None
            if record.state == INCOMING:
                return self._revert_in(record)
            if record.state == OUTGOING:
                return self.operations.run(record, PendingOp.REVERT_OUT)
            return self.operations.run(record, PendingOp.RELEASE)

    # -- instance life cycle --------------------------------------------------------------------

    def delete_instance(self, instance_uuid: str) -> list[str]:
        """Delete (or hard delete): free everything the instance and its migrations hold."""
        with self.lock:
            return [self.operations.run(r, PendingOp.DELETE) for r in self.store.for_instance(instance_uuid)]

    def _set_state(self, instance_uuid: str, allowed: tuple[str, ...], state: str) -> list[Claim]:
        with self.lock:
            records = self.store.for_instance(instance_uuid)
            if not records:
                raise ClaimNotFound(f"instance {instance_uuid} has no claim on {self.host}")
            blocked = [r for r in records if r.state not in allowed and r.state != state]
            if blocked:
                raise ClaimError(
                    f"instance {instance_uuid} is {blocked[0].state} on {self.host}; it cannot become {state}"
                )
            return [Claim(self.store.update(r, state=state) if r.state != state else r, self) for r in records]

    def soft_delete_instance(self, instance_uuid: str) -> list[Claim]:
        """Soft delete keeps the claims until a hard delete or the reclaim period."""
        return self._set_state(instance_uuid, (ACTIVE,), SOFT_DELETED)

    def restore_instance(self, instance_uuid: str) -> list[Claim]:
        return self._set_state(instance_uuid, (SOFT_DELETED,), ACTIVE)

    def reclaim_soft_deleted(self, older_than: float | None = None) -> list[str]:
        """Free soft-deleted instances older than ``older_than`` seconds (default: the configured period).
        A negative age is refused: it would free every soft-deleted instance at once."""
        if older_than is not None and (
            isinstance(older_than, bool) or not isinstance(older_than, int | float) or not older_than >= 0
        ):
            raise InvalidRequest(f"older_than is a number of seconds >= 0, not {older_than!r}")
        period = self.config.audit.reclaim_instance_interval if older_than is None else older_than
        if older_than is None and period <= 0:
            return []
        with self.lock:
            cutoff = time.time() - period
            reclaimed = []
            for record in self.store.all():
                if record.state == SOFT_DELETED and record.state_changed_at <= cutoff:
                    self.operations.run(record, PendingOp.RELEASE)
                    reclaimed.append(record.instance_uuid)
            return reclaimed

    def shelve_instance(self, instance_uuid: str) -> list[Claim]:
        """Shelve keeps the claims: the instance stays on the host until offloaded."""
        return self._set_state(instance_uuid, (ACTIVE,), SHELVED)

    def shelve_offload_instance(self, instance_uuid: str) -> list[str]:
        """Offload frees everything; unshelving claims again, on whatever host is chosen."""
        with self.lock:
            records = self.store.for_instance(instance_uuid)
            if any(r.state in MOVING for r in records):
                raise ClaimError(f"instance {instance_uuid} is moving; it cannot be offloaded")
            return [self.operations.run(r, PendingOp.RELEASE) for r in records]

    def unshelve_claim(
        self, instance: InstanceSpec, preempted: Collection[str] = (), held: Allocations | None = None
    ) -> Claim:
        """Unshelve: a shelved (not offloaded) instance keeps its claim; an offloaded one claims anew
        (``held`` as for ``instance_claim``)."""
        with self.lock:
            shelved = [r for r in self.store.for_instance(instance.uuid) if r.state == SHELVED]
            if shelved:
                return Claim(self.store.update(shelved[0], state=ACTIVE), self)
            return self.instance_claim(instance, preempted, held)

    # -- evacuation, source side ----------------------------------------------------------------

    def cleanup_evacuated(self, instance_uuid: str, migration_uuid: str) -> list[str]:
        """The instance was evacuated away while this host was down: drop what is left here."""
        with self.lock:
            return evacuation.cleanup_evacuated(self, instance_uuid, migration_uuid)

    def cleanup_evacuations(self, snapshot: ByConsumer | None = None) -> list[dict[str, str | None]]:
        """Find instances evacuated while this host was down and clean up after them
        (``berth.tracker.moving.evacuation``)."""
        with self.lock:
            return evacuation.cleanup_evacuations(self, snapshot)

    def placement_snapshot(self) -> ByConsumer:
        """consumer -> provider -> class -> amount, over this host's providers, as Placement has them."""
        snapshot: ByConsumer = {}
        for rp in self.require_tree().holders() | self.leftover_providers:
            for consumer, resources in self.placement.provider_allocations(rp).items():
                snapshot.setdefault(consumer, {})[rp] = resources
        return snapshot

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

    def capacity(self) -> dict[str, Any]:
        """The host as the tracker sees it: inventories, usage from claims, NUMA cells, PCI slots."""
        with self.lock:
            return capacity_report(
                self.host,
                self.require_tree(),
                self.store.all(),
                provider_config=self.config.provider_config,
                shared_storage=self.shared_provider,
            )

    # -- audit ----------------------------------------------------------------------------------

    def audit(self, heal: bool | None = None) -> AuditReport:
        """Compare claims, Placement and the hypervisor; heal when asked (or configured) to."""
        if heal is not None and not isinstance(heal, bool):
            raise InvalidRequest(f"heal is true or false, not {heal!r}")
        with self.lock:
            return run_audit(self, heal=self.config.audit.heal if heal is None else heal)

    def periodic(self) -> dict[str, Any]:
        """What the agent runs every audit interval."""
        with self.lock:
            sync = self.update_available_resource()
            report = self.audit()
            reclaimed = self.reclaim_soft_deleted()
            return {"sync": sync.to_dict(), "audit": report.to_dict(), "reclaimed": reclaimed}


def _canonical_uuid(value: str) -> bool:
    """Whether ``value`` is a uuid as the service writes its consumers' (dashed, lower-case)."""
    try:
        return str(uuidlib.UUID(value)) == value
    except ValueError:
        return False
