"""Fitting a request on a host: which providers, NUMA cells, pinned CPUs and PCI devices it gets.

Everything here is pure: a request (``Flavor``), the host's tree and what its claims already use
(``HostUsage``) go in; a ``Plan`` (allocations per provider, NUMA cells with their pinned CPUs, PCI
devices) comes out, or ``DoesNotFit`` with the reasons (``InvalidHostRequest`` for a malformed
flavor). Whether an amount fits an inventory is Placement's rule, taken from
``berth.domain.capacity``; it applies to NUMA cells too, with the compute node's allocation ratios.
The compute tracker claims with ``plan_claim``; a scheduler asks the same question of a host's
snapshot (``berth.domain.host.snapshot.fits``).
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass

from berth.domain.capacity import Inventory
from berth.domain.host.allocations import Allocations
from berth.domain.host.assignments import CellAssignment, PciAssignment
from berth.domain.host.errors import DoesNotFit
from berth.domain.host.request import Flavor, NumaRequest, PciRequest
from berth.domain.host.tree import CellInfo, ProviderNode, ProviderTree
from berth.domain.host.usage import HostUsage


def refusal(inventory: Inventory, used: int, amount: int) -> str | None:
    """Why ``amount`` more cannot be allocated on top of ``used``, or None when it can."""
    if not inventory.fits_unit_constraints(amount):
        if amount < inventory.min_unit:
            return f"{amount} is below the minimum unit {inventory.min_unit}"
        if amount > inventory.max_unit:
            return f"{amount} is above the maximum unit {inventory.max_unit}"
        return f"{amount} is not a multiple of the step size {inventory.step_size}"
    if not inventory.has_room(used, amount):
        return f"{amount} requested, {max(inventory.capacity - used, 0)} of {inventory.capacity} free"
    return None


# --- the plan ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    allocations: Allocations
    shared: Allocations
    numa: tuple[CellAssignment, ...]
    pci: tuple[PciAssignment, ...]


Wanted = defaultdict[str, Counter[str]]


def plan_claim(flavor: Flavor, tree: ProviderTree, usage: HostUsage, *, shared_provider: str | None = None) -> Plan:
    """Fit ``flavor`` on the host, or raise ``DoesNotFit`` naming every shortage found."""
    flavor.validate()
    wanted, shared = _flavor_resources(flavor, tree.root.synced_uuid, shared_provider)
    reasons = _place_extra_resources(flavor, tree, usage, wanted)
    reasons += _shortages(wanted, tree, usage)
    if reasons:
        raise DoesNotFit(reasons)
    numa_request = flavor.numa_request
    if numa_request is not None:
        numa, pci = _fit_numa(flavor, numa_request, tree, usage)
    else:
        numa, pci = [], _fit_pci(flavor.pci, tree, usage, cells=None)
    for device in pci:
        wanted[device.provider_uuid][device.resource_class] += 1
    allocations = {rp: {rc: n for rc, n in res.items() if n} for rp, res in wanted.items() if +res}
    return Plan(allocations=allocations, shared=shared, numa=tuple(numa), pci=tuple(pci))


def _flavor_resources(flavor: Flavor, root: str, shared_provider: str | None) -> tuple[Wanted, Allocations]:
    """CPUs and memory on the compute node; the disk there too, or on the sharing provider."""
    wanted: Wanted = defaultdict(Counter)
    wanted[root][flavor.cpu_class] += flavor.vcpus
    wanted[root]["MEMORY_MB"] += flavor.memory_mb
    shared: Allocations = {}
    if flavor.disk_gb and shared_provider:
        shared = {shared_provider: {"DISK_GB": flavor.disk_gb}}
    elif flavor.disk_gb:
        wanted[root]["DISK_GB"] += flavor.disk_gb
    return wanted, shared


def _place_extra_resources(flavor: Flavor, tree: ProviderTree, usage: HostUsage, wanted: Wanted) -> list[str]:
    """Other classes go to the first provider (not a PCI device) with room for them."""
    reasons = []
    for rc, amount in sorted(flavor.resources.items()):
        if amount == 0:
            continue
        holders = [n for n in tree if rc in n.inventories and n.pci is None]
        chosen = next((n for n in holders if _has_room(n, rc, amount, usage, wanted)), None)
        if chosen is None:
            reasons.append(
                f"{rc}: no provider of this host has {amount} free" if holders else f"{rc}: this host has none"
            )
            continue
        wanted[chosen.synced_uuid][rc] += amount
    return reasons


def _has_room(node: ProviderNode, rc: str, amount: int, usage: HostUsage, wanted: Wanted) -> bool:
    uuid = node.synced_uuid
    return refusal(node.inventories[rc], usage.used(uuid, rc) + wanted[uuid][rc], amount) is None


def _shortages(wanted: Wanted, tree: ProviderTree, usage: HostUsage) -> list[str]:
    """Every class the host lacks or has too little of, provider by provider."""
    reasons = []
    for rp, resources in wanted.items():
        node = tree.by_uuid(rp)
        for rc, amount in resources.items():
            inventory = node.inventories.get(rc)
            if inventory is None:
                reasons.append(f"{rc}: this host has none")
                continue
            why = refusal(inventory, usage.used(rp, rc), amount)
            if why:
                reasons.append(f"{rc} on {node.name}: {why}")
    return reasons


# --- NUMA cells and PCI devices ------------------------------------------------------------------------


@dataclass(frozen=True)
class CellLimits:
    """A NUMA cell's floating vCPUs and memory as inventories: the compute node's ratios apply to its cells."""

    vcpu_ratio: float
    memory_ratio: float

    @classmethod
    def of(cls, tree: ProviderTree) -> CellLimits:
        vcpu = tree.root.inventories.get("VCPU")
        memory = tree.root.inventories.get("MEMORY_MB")
        return cls(vcpu.allocation_ratio if vcpu else 1.0, memory.allocation_ratio if memory else 1.0)

    def vcpus(self, cell: CellInfo) -> Inventory:
        return Inventory(total=len(cell.shared_cpus), allocation_ratio=self.vcpu_ratio)

    def memory_mb(self, cell: CellInfo) -> Inventory:
        return Inventory(total=cell.memory_mb, allocation_ratio=self.memory_ratio)


def _fit_numa(
    flavor: Flavor, request: NumaRequest, tree: ProviderTree, usage: HostUsage
) -> tuple[list[CellAssignment], list[PciAssignment]]:
    """The first placement of the guest's cells on distinct host cells where the cells and the PCI
    requests fit."""
    guest = request.guest_cells(flavor.vcpus, flavor.memory_mb)
    cells = tree.cells
    if len(guest) > len(cells):
        raise DoesNotFit([f"NUMA: {len(guest)} guest cells asked, the host has {len(cells)}"])
    limits = CellLimits.of(tree)
    dedicated = flavor.cpu_policy == "dedicated"
    reasons: list[str] = []
    for host_cells in itertools.permutations(cells, len(guest)):
        assignments = []
        for index, ((vcpus, memory), cell) in enumerate(zip(guest, host_cells, strict=True)):
            fitted = _fit_cell(index, cell, vcpus, memory, dedicated=dedicated, usage=usage, limits=limits)
            if isinstance(fitted, str):
                reasons.append(fitted)
                break
            assignments.append(fitted)
        else:
            try:
                pci = _fit_pci(flavor.pci, tree, usage, cells={a.host_cell for a in assignments})
            except DoesNotFit as e:
                reasons.extend(e.reasons)
                continue
            return assignments, pci
    raise DoesNotFit(reasons or ["NUMA: no placement of the guest cells fits"])


def _fit_cell(
    index: int, cell: CellInfo, vcpus: int, memory: int, *, dedicated: bool, usage: HostUsage, limits: CellLimits
) -> CellAssignment | str:
    """Guest cell ``index`` on host cell ``cell``, or why it does not fit there."""
    pins: tuple[int, ...] = ()
    if dedicated:
        free = sorted(cell.dedicated_cpus - usage.pinned.get(cell.id, set()))
        if len(free) < vcpus:
            return f"NUMA cell {cell.id}: {len(free)} free dedicated CPUs, {vcpus} asked"
        pins = tuple(free[:vcpus])
    else:
        floating = limits.vcpus(cell)
        if not floating.has_room(usage.cell_vcpus[cell.id], vcpus):
            free_vcpus = max(floating.capacity - usage.cell_vcpus[cell.id], 0)
            return f"NUMA cell {cell.id}: {free_vcpus} vCPUs free, {vcpus} asked"
    cell_memory = limits.memory_mb(cell)
    if not cell_memory.has_room(usage.cell_memory[cell.id], memory):
        free_memory = max(cell_memory.capacity - usage.cell_memory[cell.id], 0)
        return f"NUMA cell {cell.id}: {free_memory} MB free, {memory} MB asked"
    return CellAssignment(index, cell.id, vcpus, memory, pins)


def _fit_pci(
    requests: tuple[PciRequest, ...], tree: ProviderTree, usage: HostUsage, cells: set[int] | None
) -> list[PciAssignment]:
    """Free slots for every PCI request; with guest cells, local devices first (or only, if required)."""
    taken: set[str] = set()
    result = []
    for index, request in enumerate(requests):
        pools = [n for n in tree.pci_providers if request.matches(n)]
        if cells is not None:
            if request.numa_policy == "required":
                pools = [n for n in pools if n.pci_pool.numa_node in cells]
            else:
                pools.sort(key=lambda n: n.pci_pool.numa_node not in cells)
        need = request.count
        for node in pools:
            pool = node.pci_pool
            for slot in pool.slots:
                if need == 0:
                    break
                if slot in usage.pci or slot in taken:
                    continue
                taken.add(slot)
                result.append(PciAssignment(index, node.synced_uuid, pool.address, slot, pool.resource_class))
                need -= 1
        if need:
            where = " on the guest's NUMA cells" if cells is not None and request.numa_policy == "required" else ""
            raise DoesNotFit(
                [
                    f"PCI request {index} ({request.describe()}): "
                    f"{request.count - need} of {request.count} devices free{where}"
                ]
            )
    return result
