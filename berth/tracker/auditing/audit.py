"""The periodic audit: claims against Placement against what the hypervisor really runs.

Usage is summed from the persisted claims, never from instance states, and the audit holds the host's
lock, so a claim in progress is either entirely counted or not yet begun: the audit cannot mistake it
for a leak. It first settles interrupted operations and cleans up after evacuations, then compares
each consumer's allocations with its claims over the consumer's scope (``berth.tracker.auditing.audit_books``:
the host's providers, and the sharing providers for a consumer that holds a claim's shared disk).

- ``instance_without_claim``: a guest is on the host (running or stopped, as the driver reports it)
  with no claim here; ``claim_id`` names the claim it was spawned in, if any.  Heal: adopt the
  allocations Placement holds for it on this host (and its shared disk) as a claim (nothing is
  invented when it has none).  The guest itself is never destroyed: it may be someone's workload.
- ``claim_without_instance``: an active claim older than the grace period whose guest is gone, with no
  move in flight (an incoming or outgoing claim's guest is on its way) and no operation pending.
  Heal: release it (a spawn that failed and was never aborted ends here).
- ``allocations_without_claim``: a consumer holds allocations on this host's providers that no claim
  accounts for.  Heal: remove them (what it holds elsewhere is left alone), unless the consumer is
  under a claim lease that has not expired (docs/leases.md): that is a build or move in flight,
  between the scheduler's claim and this host's, and the service frees it itself if it is never
  confirmed.  Such a finding stays, unhealed, with the reason in its detail.
- ``claim_without_allocations`` / ``allocation_mismatch``: Placement lost or changed what a claim holds,
  on the host or on the sharing provider.  Heal: write the claim's allocations back, all of them.
- ``stale_move``: one side of a move whose other side was already ended elsewhere.  Heal: forget it.
- ``usage_mismatch``: a provider's usage in Placement differs from the claims' sum; for a sharing
  provider, what this host's claims use of it differs from what their consumers hold there (the
  symptom of the findings above; it goes away with them).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from berth.clients.errors import PlacementError
from berth.domain.host import allocations
from berth.domain.host.allocations import Allocations, ByConsumer
from berth.domain.host.assignments import PciAssignment
from berth.domain.host.records import ACTIVE, INSTANCE, MIGRATION, ClaimRecord
from berth.domain.host.request import Flavor
from berth.domain.host.usage import usage_of
from berth.tracker.auditing.audit_books import ConsumerBooks, HostBooks, read_books
from berth.tracker.facts import Guest
from berth.tracker.host_parts import HostParts
from berth.tracker.recovery import PendingOp

INSTANCE_WITHOUT_CLAIM = "instance_without_claim"
CLAIM_WITHOUT_INSTANCE = "claim_without_instance"
ALLOCATIONS_WITHOUT_CLAIM = "allocations_without_claim"
CLAIM_WITHOUT_ALLOCATIONS = "claim_without_allocations"
ALLOCATION_MISMATCH = "allocation_mismatch"
STALE_MOVE = "stale_move"
USAGE_MISMATCH = "usage_mismatch"


@dataclass
class Finding:
    kind: str
    detail: str
    instance_uuid: str | None = None
    consumer_uuid: str | None = None
    claim_id: str | None = None
    provider_uuid: str | None = None
    claimed: Allocations | None = None  # what the claims say the consumer holds (in its scope)
    held: Allocations | None = None  # what Placement says it holds there
    missing: Allocations | None = None  # what the claims hold beyond Placement
    healed: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class AuditReport:
    host: str
    heal: bool
    started_at: float
    findings: list[Finding] = field(default_factory=list)
    residual: list[Finding] = field(default_factory=list)  # what is still wrong after healing
    usage: Allocations = field(default_factory=dict)  # provider -> class -> used, from claims
    recovered: list[dict[str, str]] = field(default_factory=list)
    evacuations: list[dict[str, str | None]] = field(default_factory=list)

    @property
    def consistent(self) -> bool:
        return not self.residual

    def of_kind(self, kind: str) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "heal": self.heal,
            "started_at": self.started_at,
            "consistent": self.consistent,
            "findings": [f.to_dict() for f in self.findings],
            "residual": [f.to_dict() for f in self.residual],
            "usage": self.usage,
            "recovered": self.recovered,
            "evacuations": self.evacuations,
        }


def run_audit(tracker: HostParts, *, heal: bool) -> AuditReport:
    """Run under ``tracker.lock``."""
    report = AuditReport(host=tracker.host, heal=heal, started_at=time.time())
    report.recovered = tracker.recover()
    snapshot: ByConsumer | None = tracker.placement_snapshot()
    report.evacuations = tracker.cleanup_evacuations(snapshot)
    if report.evacuations:
        snapshot = None
    report.findings = _Audit(tracker, heal=heal).check(snapshot)
    if heal and any(f.healed for f in report.findings):
        report.residual = _Audit(tracker, heal=False).check(None)
    else:
        report.residual = [f for f in report.findings if not f.healed]
    report.usage = claimed_usage(tracker.store.all())
    return report


def claimed_usage(records: list[ClaimRecord]) -> Allocations:
    """Provider -> class -> amount the claims use: the host's providers and their shared disk."""
    shared = [r.shared_allocations for r in records if r.holds_shared]
    return allocations.total([usage_of(records).provider_totals(), *shared])


Repair = tuple[bool, Finding, Callable[[], str | None]]  # (takes capacity, finding, heal: what it did, if anything)


class _Audit:
    def __init__(self, tracker: HostParts, *, heal: bool):
        self.tracker = tracker
        self.heal = heal

    def check(self, snapshot: ByConsumer | None) -> list[Finding]:
        guests = self.tracker.driver.guests()
        findings = self._guests_without_claims(guests)
        orphans = self._claims_without_guests(guests)
        if any(f.healed for f in orphans):
            snapshot = None  # the releases changed what Placement holds here
        findings += orphans
        books = read_books(self.tracker, snapshot)
        compared = (self._compare(books.consumers[consumer], books) for consumer in sorted(books.consumers))
        repairs = [repair for repair in compared if repair is not None]
        findings += [finding for _, finding, _ in repairs]
        findings += self._host_usage_mismatches(books) + self._pool_usage_mismatches(books)
        if self.heal:
            _repair(repairs)
        return findings

    # -- the hypervisor against the claims ----------------------------------------------------------

    def _guests_without_claims(self, guests: dict[str, Guest]) -> list[Finding]:
        """A guest runs here that no claim accounts for."""
        tracker = self.tracker
        claimed = {r.instance_uuid for r in tracker.store.all()}
        findings = []
        for uuid in sorted(set(guests) - claimed):
            guest = guests[uuid]
            spawned_in = f", spawned in claim {guest.claim_id} which is gone" if guest.claim_id else ""
            finding = Finding(
                INSTANCE_WITHOUT_CLAIM,
                f"guest {uuid} ({guest.state}{spawned_in}) is on {tracker.host} without a claim",
                instance_uuid=uuid,
                claim_id=guest.claim_id,
            )
            if self.heal:
                finding.healed = _adopt(tracker, uuid)
            findings.append(finding)
        return findings

    def _claims_without_guests(self, guests: dict[str, Guest]) -> list[Finding]:
        """An active claim past its grace period has no guest, and no move explains it."""
        tracker = self.tracker
        grace = tracker.config.audit.orphan_grace_seconds
        now = time.time()
        findings = []
        for record in tracker.store.all():
            if record.state != ACTIVE or record.pending_op or record.instance_uuid in guests:
                continue
            if now - record.state_changed_at < grace:
                continue  # still being built
            finding = Finding(
                CLAIM_WITHOUT_INSTANCE,
                f"claim {record.claim_id} of {record.instance_uuid} has no guest on {tracker.host}",
                instance_uuid=record.instance_uuid,
                claim_id=record.claim_id,
            )
            if self.heal:
                finding.healed = tracker.operations.run(record, PendingOp.RELEASE)
            findings.append(finding)
        return findings

    # -- the claims against Placement, consumer by consumer ------------------------------------------

    def _compare(self, entry: ConsumerBooks, books: HostBooks) -> Repair | None:
        if entry.agree:
            return None
        tracker, consumer = self.tracker, entry.consumer
        if not entry.claims:
            finding = Finding(
                ALLOCATIONS_WITHOUT_CLAIM,
                f"consumer {consumer} holds {entry.held} on {tracker.host} without a claim",
                consumer_uuid=consumer,
                held=entry.held,
            )
            return False, finding, lambda: _remove_unless_leased(tracker, finding, books.ours)
        first = entry.claims[0]
        if entry.moving and not allocations.on(entry.held, books.ours):
            finding = Finding(
                STALE_MOVE,
                f"the move of {first.instance_uuid} ({first.migration_uuid}) "
                "holds nothing here any more: its other side ended it",
                instance_uuid=first.instance_uuid,
                consumer_uuid=consumer,
                claim_id=first.claim_id,
            )
            return False, finding, lambda: _forget(tracker, entry.claims)
        missing = allocations.missing(entry.claimed, entry.held)
        finding = Finding(
            CLAIM_WITHOUT_ALLOCATIONS if not entry.held else ALLOCATION_MISMATCH,
            f"consumer {consumer}: claims say {entry.claimed}, Placement has {entry.held}"
            + (f"; missing {missing}" if missing else ""),
            instance_uuid=first.instance_uuid,
            consumer_uuid=consumer,
            claim_id=first.claim_id,
            claimed=entry.claimed,
            held=entry.held,
            missing=missing,
        )
        return allocations.grows(entry.held, entry.claimed), finding, lambda: _restore(tracker, entry)

    # -- provider usages (before repairs) -------------------------------------------------------------

    def _host_usage_mismatches(self, books: HostBooks) -> list[Finding]:
        """Each of the host's providers: the claims' sum against what Placement holds on it."""
        claimed = usage_of(self.tracker.store.all()).provider_totals()
        held = allocations.total(books.on_host.values())
        findings = []
        for node in self.tracker.require_tree():
            uuid = node.synced_uuid
            if claimed.get(uuid, {}) != held.get(uuid, {}):
                findings.append(
                    Finding(
                        USAGE_MISMATCH,
                        f"{node.name}: claims use {claimed.get(uuid, {})}, Placement holds {held.get(uuid, {})}",
                        provider_uuid=uuid,
                    )
                )
        return findings

    def _pool_usage_mismatches(self, books: HostBooks) -> list[Finding]:
        """Each sharing provider the host uses: this host's claims against what their consumers hold there."""
        findings = []
        for pool in sorted(books.pools):
            claimed, held = books.pool_usage(pool)
            if claimed != held:
                findings.append(
                    Finding(
                        USAGE_MISMATCH,
                        f"sharing provider {pool}: the claims of {self.tracker.host} use {claimed}, "
                        f"Placement holds {held} for them",
                        provider_uuid=pool,
                    )
                )
        return findings


def _repair(repairs: list[Repair]) -> None:
    """What frees capacity is repaired before what takes it."""
    for _, finding, heal in sorted(repairs, key=lambda repair: repair[0]):
        try:
            finding.healed = heal()
        except PlacementError as e:
            finding.detail += f" (not healed: {e.detail})"


def _remove_unless_leased(tracker: HostParts, finding: Finding, ours: set[str]) -> str | None:
    """Take a consumer's allocations off this host, leaving what it holds elsewhere; a consumer
    under a live lease is left alone."""
    consumer = str(finding.consumer_uuid)
    # Read after the books: a build or move takes its lease before its allocations, and its lease is
    # confirmed only after this host's claim, which waits for the host's lock the audit holds. So a
    # consumer found here without a live lease is not in flight: it never had a lease, or the lease
    # was released or expired, which the service frees as well.
    if _leased(tracker, consumer):
        finding.detail += " (kept: under a claim lease, a build or move in flight)"
        return None
    tracker.writer.rewrite(
        [consumer],
        lambda s: {consumer: (s[consumer].outside(ours), None)},
        owner=("", ""),
        what=f"audit removal of {consumer}",
    )
    return "removed"


def _leased(tracker: HostParts, consumer: str) -> bool:
    lease = tracker.placement.lease(consumer)
    return lease is not None and float(lease.get("expires_in", 0)) > 0


def _forget(tracker: HostParts, records: list[ClaimRecord]) -> str:
    for record in records:
        tracker.operations.run(record, PendingOp.FORGET)
    return "forgotten"


def _restore(tracker: HostParts, entry: ConsumerBooks) -> str:
    """Write back everything the claims say the consumer holds in its scope (shared disk included)."""
    consumer, record = entry.consumer, entry.claims[0]
    consumer_type = MIGRATION if consumer == record.migration_uuid else INSTANCE
    tracker.writer.rewrite(
        [consumer],
        lambda s: {consumer: ({**s[consumer].outside(entry.scope), **entry.claimed}, consumer_type)},
        owner=record.owner,
        what=f"audit repair of {consumer}",
    )
    return "rewritten"


def _adopt(tracker: HostParts, instance_uuid: str) -> str | None:
    """A guest without a claim whose allocations Placement holds here: make them a claim."""
    state = tracker.placement.consumer(instance_uuid)
    mine = state.on(tracker.our_providers())
    if not mine:
        return None
    tree = tracker.require_tree()
    on_root = mine.get(tree.root.synced_uuid, {})
    shared = state.on(tracker.sharing_providers())
    flavor = Flavor(
        name="adopted",
        vcpus=on_root.get("VCPU", 0) + on_root.get("PCPU", 0),
        memory_mb=on_root.get("MEMORY_MB", 0),
        disk_gb=on_root.get("DISK_GB", 0) + sum(res.get("DISK_GB", 0) for res in shared.values()),
        cpu_policy="dedicated" if on_root.get("PCPU") else "shared",
    )
    taken = set(tracker.usage().pci)
    devices = []
    for node in tree.pci_providers:
        pool = node.pci_pool
        count = mine.get(node.synced_uuid, {}).get(pool.resource_class, 0)
        free = [s for s in pool.slots if s not in taken][:count]
        devices += [PciAssignment(-1, node.synced_uuid, pool.address, slot, pool.resource_class) for slot in free]
    tracker.store.add(
        ClaimRecord.new(
            host=tracker.host,
            instance_uuid=instance_uuid,
            consumer_uuid=instance_uuid,
            kind="adopted",
            state=ACTIVE,
            project_id=state.project_id or "",
            user_id=state.user_id or "",
            flavor=flavor,
            allocations=mine,
            shared_allocations=shared,
            pci=tuple(devices),
        )
    )
    return "adopted"
