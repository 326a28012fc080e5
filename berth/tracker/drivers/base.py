"""What a driver reports about its host, and the provider tree built from it.

A driver answers two questions: what hardware does this host have (``HostFacts``: CPUs, NUMA cells,
memory, disk, PCI devices) and which guests does the hypervisor run (``guests()``).  Everything
policy-like (host reservations, allocation ratios, which PCI devices may be handed to guests, extra
resources from the provider config) is applied on top of the facts by ``berth.tracker.hosttree``, the
same way for every driver, so a fake host and a real one produce trees of the same shape.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass, field

# --- facts a driver discovers ------------------------------------------------------------------


@dataclass(frozen=True)
class NumaCell:
    id: int
    cpus: frozenset[int]
    memory_mb: int


@dataclass(frozen=True)
class PciDevice:
    address: str  # domain:bus:slot.function, e.g. "0000:81:00.0"
    vendor_id: str  # four lower-case hex digits, no "0x"
    product_id: str
    numa_node: int | None = None  # None when the platform does not say
    class_code: str = ""  # six hex digits, e.g. "020000" for an Ethernet controller
    physfn: str | None = None  # for a virtual function: its physical function's address
    vfs: tuple[str, ...] = ()  # for a physical function: its virtual functions' addresses

    @property
    def is_vf(self) -> bool:
        return self.physfn is not None


@dataclass(frozen=True)
class HostFacts:
    cpus: frozenset[int]  # online logical CPUs
    memory_mb: int
    disk_gb: int
    cells: tuple[NumaCell, ...]
    pci_devices: tuple[PciDevice, ...] = ()


@dataclass(frozen=True)
class Guest:
    """A guest the hypervisor has, whatever the books say."""

    uuid: str
    running: bool = True
    # What the hypervisor knows the guest uses ({"VCPU": 2, "MEMORY_MB": 2048, ...}), if it knows.
    resources: dict | None = None


class Driver(abc.ABC):
    """The host-facing half of the tracker: discovery only, no bookkeeping."""

    name = "abstract"

    @abc.abstractmethod
    def host_facts(self) -> HostFacts:
        """The host's hardware as it is now."""

    @abc.abstractmethod
    def guests(self) -> dict[str, Guest]:
        """Every guest present on the host, by instance uuid."""

    def provider_tree(self, host: str, config, provider_config=None) -> ProviderTree:
        """The host as a tree of resource providers (see ``berth.tracker.hosttree``)."""
        from berth.tracker.hosttree import build_provider_tree

        return build_provider_tree(host, self.host_facts(), config, provider_config)


# --- the provider tree -------------------------------------------------------------------------


@dataclass
class Inventory:
    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int | None = None  # None: the total
    step_size: int = 1
    allocation_ratio: float = 1.0

    @property
    def effective_max_unit(self) -> int:
        return self.total if self.max_unit is None else self.max_unit

    @property
    def capacity(self) -> int:
        """What may be allocated in all: Placement's ``(total - reserved) * allocation_ratio``."""
        return int((self.total - self.reserved) * self.allocation_ratio)

    def as_placement(self) -> dict:
        return {
            "total": self.total,
            "reserved": self.reserved,
            "min_unit": self.min_unit,
            "max_unit": self.effective_max_unit,
            "step_size": self.step_size,
            "allocation_ratio": float(self.allocation_ratio),
        }

    @classmethod
    def from_placement(cls, body: dict) -> Inventory:
        return cls(
            total=body["total"],
            reserved=body.get("reserved", 0),
            min_unit=body.get("min_unit", 1),
            max_unit=body.get("max_unit"),
            step_size=body.get("step_size", 1),
            allocation_ratio=body.get("allocation_ratio", 1.0),
        )

    def accepts(self, amount: int, used: int) -> str | None:
        """Why ``amount`` more cannot be allocated on top of ``used``, or None when it can."""
        if amount < self.min_unit:
            return f"{amount} is below the minimum unit {self.min_unit}"
        if amount > self.effective_max_unit:
            return f"{amount} is above the maximum unit {self.effective_max_unit}"
        if amount % self.step_size:
            return f"{amount} is not a multiple of the step size {self.step_size}"
        if used + amount > self.capacity:
            return f"{amount} requested, {max(self.capacity - used, 0)} of {self.capacity} free"
        return None


@dataclass(frozen=True)
class CellInfo:
    """A NUMA cell as claims see it: which CPUs float (VCPU) and which are pinned (PCPU)."""

    id: int
    shared_cpus: frozenset[int]
    dedicated_cpus: frozenset[int]
    memory_mb: int


@dataclass(frozen=True)
class PciPool:
    """A PCI provider's devices: one slot for a whole device, one per virtual function for a PF."""

    address: str
    vendor_id: str
    product_id: str
    numa_node: int | None
    resource_class: str
    slots: tuple[str, ...]


@dataclass
class ProviderNode:
    name: str
    parent: str | None  # the parent's name; None for the compute node
    kind: str  # "compute" | "numa" | "pci" | "custom"
    inventories: dict[str, Inventory] = field(default_factory=dict)
    traits: set[str] = field(default_factory=set)
    aggregates: set[str] = field(default_factory=set)
    cell: CellInfo | None = None  # for kind "numa"
    pci: PciPool | None = None  # for kind "pci"
    uuid: str | None = None  # known once the tree is synchronised with the service


class ProviderTree:
    """The providers of one host, parents before children."""

    def __init__(self, nodes: list[ProviderNode]):
        roots = [n for n in nodes if n.parent is None]
        if len(roots) != 1:
            raise ValueError(f"a host's tree has exactly one root, not {len(roots)}")
        by_name: dict[str, ProviderNode] = {}
        for node in nodes:
            if node.name in by_name:
                raise ValueError(f"two providers are named {node.name!r}")
            by_name[node.name] = node
        for node in nodes:
            if node.parent is not None and node.parent not in by_name:
                raise ValueError(f"provider {node.name!r} names an unknown parent {node.parent!r}")
        self._by_name = by_name
        self.root = roots[0]
        self._order = self._parents_first()

    def _parents_first(self) -> list[ProviderNode]:
        order, seen = [], set()

        def visit(node, path):
            if node.name in seen:
                return
            if node.name in path:
                raise ValueError(f"provider {node.name!r} is its own ancestor")
            if node.parent is not None:
                visit(self._by_name[node.parent], path | {node.name})
            seen.add(node.name)
            order.append(node)

        for node in self._by_name.values():
            visit(node, frozenset())
        return order

    def __iter__(self) -> Iterator[ProviderNode]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def get(self, name: str) -> ProviderNode:
        return self._by_name[name]

    def by_uuid(self, uuid: str) -> ProviderNode | None:
        for node in self._order:
            if node.uuid == uuid:
                return node
        return None

    def uuids(self) -> set[str]:
        return {n.uuid for n in self._order if n.uuid}

    def children(self, name: str) -> list[ProviderNode]:
        return [n for n in self._order if n.parent == name]

    def depth(self, name: str) -> int:
        depth, node = 0, self._by_name[name]
        while node.parent is not None:
            depth, node = depth + 1, self._by_name[node.parent]
        return depth

    @property
    def cells(self) -> list[CellInfo]:
        return sorted((n.cell for n in self._order if n.cell is not None), key=lambda c: c.id)

    def cell_provider(self, cell_id: int) -> ProviderNode | None:
        for node in self._order:
            if node.cell is not None and node.cell.id == cell_id:
                return node
        return None

    @property
    def pci_providers(self) -> list[ProviderNode]:
        return [n for n in self._order if n.pci is not None]

    def resource_classes(self) -> set[str]:
        return {rc for n in self._order for rc in n.inventories}

    def traits(self) -> set[str]:
        return {t for n in self._order for t in n.traits}
