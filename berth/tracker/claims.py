"""Claims: what an instance asks of a host, what the host gave it, and how a request is fitted.

Everything here is pure: a request (``Flavor``), the host's tree and what the persisted claims already
use (``HostUsage``) go in; a ``Plan`` (allocations per provider, NUMA cells with their pinned CPUs,
PCI devices) or a ``ClaimFailed`` with the reasons comes out.  The tracker writes plans to Placement
and to its store; this module never does I/O.
"""

from __future__ import annotations

import itertools
import time
import uuid as uuidlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace

from berth.tracker.drivers.base import ProviderTree

# --- errors ------------------------------------------------------------------------------------


class ClaimError(Exception):
    """A claim operation was refused; ``status`` is the HTTP status the agent answers with."""

    status = 409
    code = "claim.refused"

    def __init__(self, message: str, *, reasons=None):
        super().__init__(message)
        self.message = message
        self.reasons = list(reasons or [])

    def to_dict(self) -> dict:
        return {"code": self.code, "message": self.message, "reasons": self.reasons}


class ClaimFailed(ClaimError):
    """The request does not fit this host."""

    code = "claim.does_not_fit"

    def __init__(self, reasons):
        reasons = list(dict.fromkeys(reasons))
        super().__init__("the request does not fit this host: " + "; ".join(reasons), reasons=reasons)


class ClaimNotFound(ClaimError):
    status = 404
    code = "claim.not_found"


class InvalidRequest(ClaimError):
    status = 400
    code = "claim.invalid_request"


# --- requests ----------------------------------------------------------------------------------

CPU_POLICIES = ("shared", "dedicated")
NUMA_POLICIES = ("required", "preferred")


@dataclass(frozen=True)
class NumaRequest:
    """A guest NUMA topology: ``cells`` guest cells, each on a different host cell."""

    cells: int = 1
    cell_vcpus: tuple[int, ...] | None = None  # default: the flavor's vCPUs split evenly
    cell_memory_mb: tuple[int, ...] | None = None  # default: its memory split evenly

    def guest_cells(self, vcpus: int, memory_mb: int) -> list[tuple[int, int]]:
        if self.cells < 1:
            raise InvalidRequest("a NUMA topology has at least one cell")
        cpus = list(self.cell_vcpus) if self.cell_vcpus else _split(vcpus, self.cells)
        memory = list(self.cell_memory_mb) if self.cell_memory_mb else _split(memory_mb, self.cells)
        if len(cpus) != self.cells or len(memory) != self.cells:
            raise InvalidRequest("cell_vcpus and cell_memory_mb need one entry per guest cell")
        if sum(cpus) != vcpus or sum(memory) != memory_mb:
            raise InvalidRequest("the guest cells' vCPUs and memory must add up to the flavor's")
        if min(cpus) < 1 or min(memory) < 1:
            raise InvalidRequest("every guest cell needs at least one vCPU and some memory")
        return list(zip(cpus, memory, strict=True))

    def to_dict(self):
        return {
            "cells": self.cells,
            "cell_vcpus": list(self.cell_vcpus) if self.cell_vcpus else None,
            "cell_memory_mb": list(self.cell_memory_mb) if self.cell_memory_mb else None,
        }

    @classmethod
    def from_dict(cls, d):
        if d is None:
            return None
        return cls(
            cells=int(d.get("cells", 1)),
            cell_vcpus=tuple(d["cell_vcpus"]) if d.get("cell_vcpus") else None,
            cell_memory_mb=tuple(d["cell_memory_mb"]) if d.get("cell_memory_mb") else None,
        )


def _split(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


@dataclass(frozen=True)
class PciRequest:
    """``count`` devices matching every given property."""

    count: int = 1
    resource_class: str | None = None
    vendor_id: str | None = None
    product_id: str | None = None
    traits: tuple[str, ...] = ()
    numa_policy: str = "preferred"  # "required": only devices local to the guest's cells

    def describe(self) -> str:
        parts = [
            f"{k}={v}"
            for k, v in (
                ("resource_class", self.resource_class),
                ("vendor_id", self.vendor_id),
                ("product_id", self.product_id),
            )
            if v
        ]
        if self.traits:
            parts.append("traits=" + ",".join(self.traits))
        return f"{self.count} x [{' '.join(parts) or 'any device'}]"

    def matches(self, node) -> bool:
        pool = node.pci
        return (
            (self.resource_class is None or self.resource_class == pool.resource_class)
            and (self.vendor_id is None or self.vendor_id.lower() == pool.vendor_id)
            and (self.product_id is None or self.product_id.lower() == pool.product_id)
            and set(self.traits) <= node.traits
        )

    def to_dict(self):
        return {
            "count": self.count,
            "resource_class": self.resource_class,
            "vendor_id": self.vendor_id,
            "product_id": self.product_id,
            "traits": list(self.traits),
            "numa_policy": self.numa_policy,
        }

    @classmethod
    def from_dict(cls, d):
        return cls(
            count=int(d.get("count", 1)),
            resource_class=d.get("resource_class"),
            vendor_id=d.get("vendor_id"),
            product_id=d.get("product_id"),
            traits=tuple(d.get("traits") or ()),
            numa_policy=d.get("numa_policy", "preferred"),
        )


@dataclass(frozen=True)
class Flavor:
    name: str
    vcpus: int
    memory_mb: int
    disk_gb: int = 0
    cpu_policy: str = "shared"  # "dedicated": pinned CPUs, claimed as PCPU
    numa: NumaRequest | None = None
    pci: tuple[PciRequest, ...] = ()
    resources: dict = field(default_factory=dict)  # any other class: {"CUSTOM_LICENSE_SEAT": 1}

    def validate(self) -> None:
        if self.vcpus < 1 or self.memory_mb < 1 or self.disk_gb < 0:
            raise InvalidRequest("a flavor needs at least one vCPU and some memory, and no negative disk")
        if self.cpu_policy not in CPU_POLICIES:
            raise InvalidRequest(f"cpu_policy is one of {', '.join(CPU_POLICIES)}")
        for rc, amount in self.resources.items():
            if rc in ("VCPU", "PCPU", "MEMORY_MB", "DISK_GB"):
                raise InvalidRequest(f"{rc} comes from the flavor's own fields, not from resources")
            if not isinstance(amount, int) or amount < 0:
                raise InvalidRequest(f"resources.{rc} must be a whole number")
        for request in self.pci:
            if request.count < 1 or request.numa_policy not in NUMA_POLICIES:
                raise InvalidRequest(f"invalid PCI request {request.describe()}")
        if self.numa_request is not None:
            self.numa_request.guest_cells(self.vcpus, self.memory_mb)

    @property
    def cpu_class(self) -> str:
        return "PCPU" if self.cpu_policy == "dedicated" else "VCPU"

    @property
    def numa_request(self) -> NumaRequest | None:
        """Pinned CPUs need a NUMA placement even when the flavor asks for none (one cell)."""
        if self.numa is None and self.cpu_policy == "dedicated":
            return NumaRequest(1)
        return self.numa

    def to_dict(self):
        return {
            "name": self.name,
            "vcpus": self.vcpus,
            "memory_mb": self.memory_mb,
            "disk_gb": self.disk_gb,
            "cpu_policy": self.cpu_policy,
            "numa": self.numa.to_dict() if self.numa else None,
            "pci": [p.to_dict() for p in self.pci],
            "resources": dict(self.resources),
        }

    @classmethod
    def from_dict(cls, d):
        if d is None:
            return None
        try:
            return cls(
                name=str(d.get("name", "")),
                vcpus=int(d["vcpus"]),
                memory_mb=int(d["memory_mb"]),
                disk_gb=int(d.get("disk_gb", 0)),
                cpu_policy=d.get("cpu_policy", "shared"),
                numa=NumaRequest.from_dict(d.get("numa")),
                pci=tuple(PciRequest.from_dict(p) for p in d.get("pci") or ()),
                resources={str(k): int(v) for k, v in (d.get("resources") or {}).items()},
            )
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidRequest(f"invalid flavor: {e}") from None


@dataclass(frozen=True)
class InstanceSpec:
    uuid: str
    flavor: Flavor
    project_id: str
    user_id: str

    def to_dict(self):
        return {
            "uuid": self.uuid,
            "flavor": self.flavor.to_dict(),
            "project_id": self.project_id,
            "user_id": self.user_id,
        }

    @classmethod
    def from_dict(cls, d):
        try:
            return cls(
                uuid=str(uuidlib.UUID(d["uuid"])),
                flavor=Flavor.from_dict(d["flavor"]),
                project_id=str(d["project_id"]),
                user_id=str(d["user_id"]),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidRequest(f"invalid instance: {e}") from None


# --- what a claim holds ------------------------------------------------------------------------


@dataclass(frozen=True)
class CellAssignment:
    guest_cell: int
    host_cell: int
    vcpus: int
    memory_mb: int
    pinned_cpus: tuple[int, ...] = ()

    def to_dict(self):
        return {
            "guest_cell": self.guest_cell,
            "host_cell": self.host_cell,
            "vcpus": self.vcpus,
            "memory_mb": self.memory_mb,
            "pinned_cpus": list(self.pinned_cpus),
        }

    @classmethod
    def from_dict(cls, d):
        return cls(d["guest_cell"], d["host_cell"], d["vcpus"], d["memory_mb"], tuple(d.get("pinned_cpus") or ()))


@dataclass(frozen=True)
class PciAssignment:
    request: int  # index into the flavor's PCI requests
    provider_uuid: str
    device: str  # the provider's device (the PF for a virtual function)
    address: str  # what the guest gets: the device itself or one virtual function
    resource_class: str

    def to_dict(self):
        return {
            "request": self.request,
            "provider_uuid": self.provider_uuid,
            "device": self.device,
            "address": self.address,
            "resource_class": self.resource_class,
        }

    @classmethod
    def from_dict(cls, d):
        return cls(d["request"], d["provider_uuid"], d["device"], d["address"], d["resource_class"])


def _allocs(d) -> dict[str, dict[str, int]]:
    return {rp: {rc: int(n) for rc, n in res.items() if n} for rp, res in (d or {}).items() if res}


@dataclass(frozen=True)
class MigrationContext:
    """Both sides of a move, kept with the destination's claim until the move is confirmed or reverted."""

    migration_uuid: str
    kind: str
    source_host: str
    dest_host: str
    old_flavor: Flavor | None
    new_flavor: Flavor
    old_numa: tuple[CellAssignment, ...]
    new_numa: tuple[CellAssignment, ...]
    old_pci: tuple[PciAssignment, ...]
    new_pci: tuple[PciAssignment, ...]
    old_allocations: dict  # what the migration consumer holds (the source's providers)
    old_shared: dict  # the instance's allocations on sharing providers before the move

    def to_dict(self):
        return {
            "migration_uuid": self.migration_uuid,
            "kind": self.kind,
            "source_host": self.source_host,
            "dest_host": self.dest_host,
            "old_flavor": self.old_flavor.to_dict() if self.old_flavor else None,
            "new_flavor": self.new_flavor.to_dict(),
            "old_numa": [c.to_dict() for c in self.old_numa],
            "new_numa": [c.to_dict() for c in self.new_numa],
            "old_pci": [p.to_dict() for p in self.old_pci],
            "new_pci": [p.to_dict() for p in self.new_pci],
            "old_allocations": self.old_allocations,
            "old_shared": self.old_shared,
        }

    @classmethod
    def from_dict(cls, d):
        if d is None:
            return None
        return cls(
            d["migration_uuid"],
            d["kind"],
            d["source_host"],
            d["dest_host"],
            Flavor.from_dict(d.get("old_flavor")),
            Flavor.from_dict(d["new_flavor"]),
            tuple(CellAssignment.from_dict(c) for c in d.get("old_numa") or ()),
            tuple(CellAssignment.from_dict(c) for c in d.get("new_numa") or ()),
            tuple(PciAssignment.from_dict(p) for p in d.get("old_pci") or ()),
            tuple(PciAssignment.from_dict(p) for p in d.get("new_pci") or ()),
            _allocs(d.get("old_allocations")),
            _allocs(d.get("old_shared")),
        )


@dataclass(frozen=True)
class SourceContext:
    """What the source host hands over when a move starts (``ResourceTracker.begin_move_out``)."""

    host: str
    instance_uuid: str
    migration_uuid: str
    flavor: Flavor
    allocations: dict
    shared_allocations: dict
    numa: tuple[CellAssignment, ...]
    pci: tuple[PciAssignment, ...]
    project_id: str
    user_id: str

    def to_dict(self):
        return {
            "host": self.host,
            "instance_uuid": self.instance_uuid,
            "migration_uuid": self.migration_uuid,
            "flavor": self.flavor.to_dict(),
            "allocations": self.allocations,
            "shared_allocations": self.shared_allocations,
            "numa": [c.to_dict() for c in self.numa],
            "pci": [p.to_dict() for p in self.pci],
            "project_id": self.project_id,
            "user_id": self.user_id,
        }

    @classmethod
    def from_dict(cls, d):
        try:
            return cls(
                d["host"],
                d["instance_uuid"],
                d["migration_uuid"],
                Flavor.from_dict(d["flavor"]),
                _allocs(d["allocations"]),
                _allocs(d.get("shared_allocations")),
                tuple(CellAssignment.from_dict(c) for c in d.get("numa") or ()),
                tuple(PciAssignment.from_dict(p) for p in d.get("pci") or ()),
                d["project_id"],
                d["user_id"],
            )
        except (KeyError, TypeError) as e:
            raise InvalidRequest(f"invalid source context: {e}") from None


# States of a claim on its host.
ACTIVE = "active"  # the instance runs (or is being built) here
INCOMING = "incoming"  # a move to this host is in flight; the instance consumer holds it
OUTGOING = "outgoing"  # a move away is in flight; the migration consumer holds it
SOFT_DELETED = "soft_deleted"
SHELVED = "shelved"
STATES = (ACTIVE, INCOMING, OUTGOING, SOFT_DELETED, SHELVED)
KINDS = ("instance", "resize", "live_migration", "evacuate", "adopted")


@dataclass(frozen=True)
class ClaimRecord:
    """One claim as persisted by the tracker's store."""

    claim_id: str
    host: str
    instance_uuid: str
    consumer_uuid: str  # the Placement consumer holding ``allocations`` (instance or migration)
    kind: str
    state: str
    project_id: str
    user_id: str
    flavor: Flavor
    allocations: dict  # provider uuid -> class -> amount, on this host's providers
    shared_allocations: dict = field(default_factory=dict)  # on sharing providers, held by the instance
    numa: tuple[CellAssignment, ...] = ()
    pci: tuple[PciAssignment, ...] = ()
    migration_uuid: str | None = None
    migration_context: MigrationContext | None = None
    pending_op: str | None = None  # an operation begun but not known to be finished (crash recovery)
    created_at: float = 0.0
    updated_at: float = 0.0
    state_changed_at: float = 0.0

    @classmethod
    def new(cls, **kw) -> ClaimRecord:
        now = time.time()
        return cls(claim_id=str(uuidlib.uuid4()), created_at=now, updated_at=now, state_changed_at=now, **kw)

    def evolve(self, **changes) -> ClaimRecord:
        changes.setdefault("updated_at", time.time())
        if "state" in changes and changes["state"] != self.state:
            changes.setdefault("state_changed_at", changes["updated_at"])
        return replace(self, **changes)

    def body(self) -> dict:
        """The fields the store keeps as a JSON document."""
        return {
            "flavor": self.flavor.to_dict(),
            "allocations": self.allocations,
            "shared_allocations": self.shared_allocations,
            "numa": [c.to_dict() for c in self.numa],
            "pci": [p.to_dict() for p in self.pci],
            "migration_context": self.migration_context.to_dict() if self.migration_context else None,
        }

    def to_dict(self) -> dict:
        return {
            "claim_id": self.claim_id,
            "host": self.host,
            "instance_uuid": self.instance_uuid,
            "consumer_uuid": self.consumer_uuid,
            "kind": self.kind,
            "state": self.state,
            "project_id": self.project_id,
            "user_id": self.user_id,
            "migration_uuid": self.migration_uuid,
            "pending_op": self.pending_op,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "state_changed_at": self.state_changed_at,
            **self.body(),
        }

    @classmethod
    def from_dict(cls, d) -> ClaimRecord:
        return cls(
            claim_id=d["claim_id"],
            host=d["host"],
            instance_uuid=d["instance_uuid"],
            consumer_uuid=d["consumer_uuid"],
            kind=d["kind"],
            state=d["state"],
            project_id=d["project_id"],
            user_id=d["user_id"],
            flavor=Flavor.from_dict(d["flavor"]),
            allocations=_allocs(d["allocations"]),
            shared_allocations=_allocs(d.get("shared_allocations")),
            numa=tuple(CellAssignment.from_dict(c) for c in d.get("numa") or ()),
            pci=tuple(PciAssignment.from_dict(p) for p in d.get("pci") or ()),
            migration_uuid=d.get("migration_uuid"),
            migration_context=MigrationContext.from_dict(d.get("migration_context")),
            pending_op=d.get("pending_op"),
            created_at=d.get("created_at", 0.0),
            updated_at=d.get("updated_at", 0.0),
            state_changed_at=d.get("state_changed_at", 0.0),
        )


# --- the claim object handed to callers ---------------------------------------------------------


class Claim:
    """A claim as its caller sees it.  As a context manager it aborts itself when the block fails::

    with tracker.instance_claim(instance) as claim:
        spawn(instance, claim.numa, claim.pci)      # an exception here frees everything
    """

    def __init__(self, record: ClaimRecord, owner):
        self.record = record
        self._owner = owner  # a ResourceTracker, or an AgentClient for a remote host

    def __getattr__(self, name):
        return getattr(self.record, name)

    def abort(self) -> None:
        self._owner.abort(self.record.claim_id)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.abort()
        return False

    def to_dict(self) -> dict:
        return self.record.to_dict()

    def __repr__(self):
        return f"<Claim {self.record.claim_id} {self.record.kind}/{self.record.state} of {self.record.instance_uuid}>"


class NopClaim(Claim):
    """What a claim that needs no resources returns (rebuild on the same host)."""

    def __init__(self, instance_uuid: str, host: str):
        self.record = None
        self.instance_uuid = instance_uuid
        self.host = host
        self.claim_id = None

    def __getattr__(self, name):
        raise AttributeError(name)

    def abort(self) -> None:
        pass

    def to_dict(self) -> dict:
        return {"claim_id": None, "instance_uuid": self.instance_uuid, "host": self.host, "kind": "none"}

    def __repr__(self):
        return f"<NopClaim of {self.instance_uuid}>"


# --- usage and fitting ---------------------------------------------------------------------------


@dataclass
class HostUsage:
    """What the persisted claims use, by provider, NUMA cell and PCI slot."""

    providers: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    cell_vcpus: Counter = field(default_factory=Counter)
    cell_memory: Counter = field(default_factory=Counter)
    pinned: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))
    pci: dict[str, str] = field(default_factory=dict)  # slot address -> claim id

    def used(self, provider_uuid: str, resource_class: str) -> int:
        return self.providers.get(provider_uuid, Counter()).get(resource_class, 0)

    def add(self, record: ClaimRecord) -> None:
        for rp, resources in record.allocations.items():
            self.providers[rp].update(resources)
        for cell in record.numa:
            if cell.pinned_cpus:
                self.pinned[cell.host_cell].update(cell.pinned_cpus)
            else:
                self.cell_vcpus[cell.host_cell] += cell.vcpus
            self.cell_memory[cell.host_cell] += cell.memory_mb
        for device in record.pci:
            self.pci[device.address] = record.claim_id

    def provider_totals(self) -> dict[str, dict[str, int]]:
        return {rp: {rc: n for rc, n in c.items() if n} for rp, c in self.providers.items() if +c}


def usage_of(records) -> HostUsage:
    """Usage is summed from claims, never from instance states: a claim in flight is always counted."""
    usage = HostUsage()
    for record in records:
        usage.add(record)
    return usage


@dataclass(frozen=True)
class Plan:
    allocations: dict[str, dict[str, int]]
    shared: dict[str, dict[str, int]]
    numa: tuple[CellAssignment, ...]
    pci: tuple[PciAssignment, ...]


def plan_claim(flavor: Flavor, tree: ProviderTree, usage: HostUsage, *, shared_provider: str | None = None) -> Plan:
    """Fit ``flavor`` on the host, or raise ``ClaimFailed`` naming every shortage found."""
    flavor.validate()
    root = tree.root
    wanted: dict[str, Counter] = defaultdict(Counter)
    wanted[root.uuid][flavor.cpu_class] += flavor.vcpus
    wanted[root.uuid]["MEMORY_MB"] += flavor.memory_mb
    shared = {}
    if flavor.disk_gb:
        if shared_provider:
            shared = {shared_provider: {"DISK_GB": flavor.disk_gb}}
        else:
            wanted[root.uuid]["DISK_GB"] += flavor.disk_gb
    reasons = []
    for rc, amount in sorted(flavor.resources.items()):
        if amount == 0:
            continue
        holders = [n for n in tree if rc in n.inventories and n.pci is None]
        chosen = next(
            (
                n
                for n in holders
                if n.inventories[rc].accepts(amount, usage.used(n.uuid, rc) + wanted[n.uuid][rc]) is None
            ),
            None,
        )
        if chosen is None:
            reasons.append(
                f"{rc}: no provider of this host has {amount} free" if holders else f"{rc}: this host has none"
            )
            continue
        wanted[chosen.uuid][rc] += amount
    for rp, resources in wanted.items():
        node = tree.by_uuid(rp)
        for rc, amount in resources.items():
            inventory = node.inventories.get(rc)
            if inventory is None:
                reasons.append(f"{rc}: this host has none")
                continue
            why = inventory.accepts(amount, usage.used(rp, rc))
            if why:
                reasons.append(f"{rc} on {node.name}: {why}")
    if reasons:
        raise ClaimFailed(reasons)

    numa_request = flavor.numa_request
    if numa_request is not None:
        numa, pci = _fit_numa(flavor, numa_request, tree, usage)
    else:
        numa, pci = (), _fit_pci(flavor.pci, tree, usage, cells=None)
    for device in pci:
        wanted[device.provider_uuid][device.resource_class] += 1
    allocations = {rp: {rc: n for rc, n in res.items() if n} for rp, res in wanted.items() if +res}
    return Plan(allocations=allocations, shared=shared, numa=tuple(numa), pci=tuple(pci))


def _fit_numa(flavor, request, tree, usage):
    guest = request.guest_cells(flavor.vcpus, flavor.memory_mb)
    cells = tree.cells
    if len(guest) > len(cells):
        raise ClaimFailed([f"NUMA: {len(guest)} guest cells asked, the host has {len(cells)}"])
    vcpu_ratio = _ratio(tree, "VCPU")
    memory_ratio = _ratio(tree, "MEMORY_MB")
    dedicated = flavor.cpu_policy == "dedicated"
    reasons = []
    for host_cells in itertools.permutations(cells, len(guest)):
        assignments = []
        for index, ((vcpus, memory), cell) in enumerate(zip(guest, host_cells, strict=True)):
            pins = ()
            if dedicated:
                free = sorted(cell.dedicated_cpus - usage.pinned.get(cell.id, set()))
                if len(free) < vcpus:
                    reasons.append(f"NUMA cell {cell.id}: {len(free)} free dedicated CPUs, {vcpus} asked")
                    break
                pins = tuple(free[:vcpus])
            else:
                capacity = int(len(cell.shared_cpus) * vcpu_ratio)
                if usage.cell_vcpus[cell.id] + vcpus > capacity:
                    reasons.append(
                        f"NUMA cell {cell.id}: {max(capacity - usage.cell_vcpus[cell.id], 0)} vCPUs free, {vcpus} asked"
                    )
                    break
            memory_capacity = int(cell.memory_mb * memory_ratio)
            if usage.cell_memory[cell.id] + memory > memory_capacity:
                reasons.append(
                    f"NUMA cell {cell.id}: {max(memory_capacity - usage.cell_memory[cell.id], 0)} MB "
                    f"free, {memory} MB asked"
                )
                break
            assignments.append(CellAssignment(index, cell.id, vcpus, memory, pins))
        else:
            try:
                pci = _fit_pci(flavor.pci, tree, usage, cells={a.host_cell for a in assignments})
            except ClaimFailed as e:
                reasons.extend(e.reasons)
                continue
            return assignments, pci
    raise ClaimFailed(reasons or ["NUMA: no placement of the guest cells fits"])


def _ratio(tree, rc) -> float:
    inventory = tree.root.inventories.get(rc)
    return inventory.allocation_ratio if inventory else 1.0


def _fit_pci(requests, tree, usage, cells):
    taken: set[str] = set()
    result = []
    for index, request in enumerate(requests):
        pools = [n for n in tree.pci_providers if request.matches(n)]
        if cells is not None:
            if request.numa_policy == "required":
                pools = [n for n in pools if n.pci.numa_node in cells]
            else:
                pools.sort(key=lambda n: n.pci.numa_node not in cells)
        need = request.count
        for node in pools:
            for slot in node.pci.slots:
                if need == 0:
                    break
                if slot in usage.pci or slot in taken:
                    continue
                taken.add(slot)
                result.append(PciAssignment(index, node.uuid, node.pci.address, slot, node.pci.resource_class))
                need -= 1
        if need:
            where = " on the guest's NUMA cells" if cells is not None and request.numa_policy == "required" else ""
            raise ClaimFailed(
                [
                    f"PCI request {index} ({request.describe()}): "
                    f"{request.count - need} of {request.count} devices free{where}"
                ]
            )
    return result
