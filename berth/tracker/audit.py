"""The periodic audit: claims against Placement against what the hypervisor really runs.

Usage is summed from the persisted claims, never from instance states, and the audit holds the host's
lock, so a claim in progress is either entirely counted or not yet begun: the audit cannot mistake it
for a leak.  Findings:

- ``instance_without_claim``: a guest runs with no claim here.  Heal: adopt the allocations Placement
  holds for it on this host as a claim (nothing is invented when Placement has none).
- ``claim_without_instance``: an active claim older than the grace period whose guest is gone, with no
  move in flight.  Heal: release it.
- ``allocations_without_claim``: a consumer holds allocations on this host's providers that no claim
  accounts for.  Heal: remove them (what it holds elsewhere is left alone).
- ``claim_without_allocations`` / ``allocation_mismatch``: Placement lost or changed what a claim holds.
  Heal: write the claim's allocations back.
- ``stale_move``: one side of a move whose other side was already ended elsewhere.  Heal: forget it.
- ``usage_mismatch``: a provider's usage in Placement differs from the claims' sum (the symptom of the
  findings above; it goes away with them).
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from berth.tracker.claims import (
    ACTIVE,
    INCOMING,
    OUTGOING,
    ClaimRecord,
    Flavor,
    PciAssignment,
    usage_of,
)
from berth.tracker.placement_client import PlacementError

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
    healed: str | None = None

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class AuditReport:
    host: str
    heal: bool
    started_at: float
    findings: list[Finding] = field(default_factory=list)
    residual: list[Finding] = field(default_factory=list)  # what is still wrong after healing
    usage: dict = field(default_factory=dict)  # provider -> class -> used, from claims
    recovered: list = field(default_factory=list)
    evacuations: list = field(default_factory=list)

    @property
    def consistent(self) -> bool:
        return not self.residual

    def of_kind(self, kind: str) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]

    def to_dict(self) -> dict:
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


def _clean(allocations) -> dict:
    return {rp: {rc: n for rc, n in res.items() if n} for rp, res in allocations.items() if any(res.values())}


def run_audit(tracker, *, heal: bool) -> AuditReport:
    """Run under ``tracker.lock``."""
    report = AuditReport(host=tracker.host, heal=heal, started_at=time.time())
    report.recovered = tracker.recover()
    snapshot = tracker.placement_snapshot()
    report.evacuations = tracker.cleanup_evacuations(snapshot)
    if report.evacuations:
        snapshot = None
    report.findings = _check(tracker, heal=heal, snapshot=snapshot)
    if heal and any(f.healed for f in report.findings):
        report.residual = _check(tracker, heal=False)
    else:
        report.residual = [f for f in report.findings if not f.healed]
    report.usage = usage_of(tracker.store.all()).provider_totals()
    return report


def _check(tracker, *, heal: bool, snapshot=None) -> list[Finding]:
    findings: list[Finding] = []
    ours = tracker.our_providers()
    guests = tracker.driver.guests()

    # Guests the books do not know.
    claimed = {r.instance_uuid for r in tracker.store.all()}
    for uuid in sorted(set(guests) - claimed):
        finding = Finding(
            INSTANCE_WITHOUT_CLAIM, f"guest {uuid} runs on {tracker.host} without a claim", instance_uuid=uuid
        )
        if heal:
            finding.healed = _adopt(tracker, uuid, ours)
        findings.append(finding)

    # Claims whose guest is gone, with no move to explain it.
    grace = tracker.config.audit.orphan_grace_seconds
    now = time.time()
    for record in tracker.store.all():
        if record.state != ACTIVE or record.pending_op or record.instance_uuid in guests:
            continue
        if now - record.state_changed_at < grace:
            continue
        finding = Finding(
            CLAIM_WITHOUT_INSTANCE,
            f"claim {record.claim_id} of {record.instance_uuid} has no guest on {tracker.host}",
            instance_uuid=record.instance_uuid,
            claim_id=record.claim_id,
        )
        if heal:
            finding.healed = tracker._run(record, "release")
            snapshot = None
        findings.append(finding)

    # Claims against Placement, consumer by consumer, on this host's providers.
    actual = tracker.placement_snapshot() if snapshot is None else snapshot
    records = [r for r in tracker.store.all() if not r.pending_op]
    expected: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    holders: dict[str, list[ClaimRecord]] = defaultdict(list)
    for record in records:
        consumer = record.consumer_uuid
        if record.state == OUTGOING and record.migration_uuid not in actual and record.instance_uuid in actual:
            consumer = record.instance_uuid  # the destination has not swapped yet, or swapped back
        for rp, resources in record.allocations.items():
            expected[consumer][rp].update(resources)
        holders[consumer].append(record)

    repairs = []  # (grows, finding, repair): what frees capacity is repaired before what takes it
    for consumer in sorted(set(expected) | set(actual)):
        want = _clean({rp: dict(c) for rp, c in expected.get(consumer, {}).items()})
        have = _clean(actual.get(consumer, {}))
        if want == have:
            continue
        owners = holders.get(consumer, [])
        if not owners:
            finding = Finding(
                ALLOCATIONS_WITHOUT_CLAIM,
                f"consumer {consumer} holds {have} on {tracker.host} without a claim",
                consumer_uuid=consumer,
            )
            repairs.append((False, finding, lambda c=consumer: _remove(tracker, c, ours)))
        elif not have and any(r.state in (INCOMING, OUTGOING) for r in owners):
            finding = Finding(
                STALE_MOVE,
                f"the move of {owners[0].instance_uuid} ({owners[0].migration_uuid}) "
                "holds nothing here any more: its other side ended it",
                instance_uuid=owners[0].instance_uuid,
                consumer_uuid=consumer,
                claim_id=owners[0].claim_id,
            )
            repairs.append((False, finding, lambda o=owners: _forget(tracker, o)))
        else:
            kind = CLAIM_WITHOUT_ALLOCATIONS if not have else ALLOCATION_MISMATCH
            finding = Finding(
                kind,
                f"consumer {consumer}: claims say {want}, Placement has {have}",
                instance_uuid=owners[0].instance_uuid,
                consumer_uuid=consumer,
                claim_id=owners[0].claim_id,
            )
            repairs.append(
                (_grows(have, want), finding, lambda c=consumer, w=want, r=owners[0]: _restore(tracker, c, w, r, ours))
            )
        findings.append(finding)
    # Provider usages: the claims' sum against what Placement holds on each provider (before repairs).
    usage = usage_of(tracker.store.all())
    held: dict[str, Counter] = defaultdict(Counter)
    for by_rp in actual.values():
        for rp, resources in by_rp.items():
            held[rp].update(resources)
    for node in tracker.tree:
        placement_usage = {rc: n for rc, n in held.get(node.uuid, Counter()).items() if n}
        claimed_usage = {rc: n for rc, n in usage.providers.get(node.uuid, Counter()).items() if n}
        if placement_usage != claimed_usage:
            findings.append(
                Finding(
                    USAGE_MISMATCH,
                    f"{node.name}: claims use {claimed_usage}, Placement holds {placement_usage}",
                    provider_uuid=node.uuid,
                )
            )
    if heal:
        for _, finding, repair in sorted(repairs, key=lambda item: item[0]):
            try:
                finding.healed = repair()
            except PlacementError as e:
                finding.detail += f" (not healed: {e.detail})"
    return findings


def _grows(have: dict, want: dict) -> bool:
    return any(n > have.get(rp, {}).get(rc, 0) for rp, res in want.items() for rc, n in res.items())


def _remove(tracker, consumer: str, ours: set[str]) -> str:
    """Take a consumer's allocations off this host, leaving what it holds elsewhere."""
    tracker._rewrite(
        [consumer],
        lambda s: {consumer: (s[consumer].outside(ours), None)},
        owner=("", ""),
        what=f"audit removal of {consumer}",
    )
    return "removed"


def _forget(tracker, records) -> str:
    for record in records:
        tracker._run(record, "forget")
    return "forgotten"


def _restore(tracker, consumer: str, want: dict, record: ClaimRecord, ours: set[str]) -> str:
    """Write back what the claims say the consumer holds on this host."""
    consumer_type = "MIGRATION" if consumer == record.migration_uuid else "INSTANCE"
    tracker._rewrite(
        [consumer],
        lambda s: {consumer: ({**s[consumer].outside(ours), **want}, consumer_type)},
        owner=(record.project_id, record.user_id),
        what=f"audit repair of {consumer}",
    )
    return "rewritten"


def _adopt(tracker, instance_uuid: str, ours: set[str]) -> str | None:
    """A guest without a claim whose allocations Placement holds here: make them a claim."""
    state = tracker.placement.consumer(instance_uuid)
    mine = state.on(ours)
    if not mine:
        return None
    root = tracker.tree.root.uuid
    on_root = mine.get(root, {})
    shared = {rp: res for rp, res in state.allocations.items() if rp == tracker.shared_provider}
    disk = on_root.get("DISK_GB", 0) + sum(res.get("DISK_GB", 0) for res in shared.values())
    flavor = Flavor(
        name="adopted",
        vcpus=on_root.get("VCPU", 0) + on_root.get("PCPU", 0),
        memory_mb=on_root.get("MEMORY_MB", 0),
        disk_gb=disk,
        cpu_policy="dedicated" if on_root.get("PCPU") else "shared",
    )
    taken = set(usage_of(tracker.store.all()).pci)
    devices = []
    for node in tracker.tree.pci_providers:
        count = mine.get(node.uuid, {}).get(node.pci.resource_class, 0)
        free = [s for s in node.pci.slots if s not in taken][:count]
        devices += [PciAssignment(-1, node.uuid, node.pci.address, slot, node.pci.resource_class) for slot in free]
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
