"""A host as a tree of resource providers: the compute node, its NUMA cells, PCI devices, extras.

The compute tracker builds the tree from a driver's facts and its configuration, makes the service
match it (which gives each provider its uuid), and fits claims against it. Inventories are
``berth.domain.capacity.Inventory``, the service's own type, so that the host and the service apply
one capacity rule. Every type here has a JSON form (``to_dict``/``from_dict``): a host's snapshot
carries its tree to schedulers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from berth.domain.capacity import INVENTORY_DEFAULTS, Inventory


@dataclass(frozen=True)
class CellInfo:
    """A NUMA cell as claims see it: which CPUs float (VCPU) and which are pinned (PCPU)."""

    id: int
    shared_cpus: frozenset[int]
    dedicated_cpus: frozenset[int]
    memory_mb: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "shared_cpus": sorted(self.shared_cpus),
            "dedicated_cpus": sorted(self.dedicated_cpus),
            "memory_mb": self.memory_mb,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CellInfo:
        return cls(
            id=int(d["id"]),
            shared_cpus=frozenset(int(c) for c in d["shared_cpus"]),
            dedicated_cpus=frozenset(int(c) for c in d["dedicated_cpus"]),
            memory_mb=int(d["memory_mb"]),
        )


@dataclass(frozen=True)
class PciPool:
    """A PCI provider's devices: one slot for a whole device, one per virtual function for a PF."""

    address: str
    vendor_id: str
    product_id: str
    numa_node: int | None
    resource_class: str
    slots: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "vendor_id": self.vendor_id,
            "product_id": self.product_id,
            "numa_node": self.numa_node,
            "resource_class": self.resource_class,
            "slots": list(self.slots),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PciPool:
        return cls(
            address=str(d["address"]),
            vendor_id=str(d["vendor_id"]),
            product_id=str(d["product_id"]),
            numa_node=None if d.get("numa_node") is None else int(d["numa_node"]),
            resource_class=str(d["resource_class"]),
            slots=tuple(str(s) for s in d["slots"]),
        )


def _inventory(d: dict[str, Any]) -> Inventory:
    fields = {**INVENTORY_DEFAULTS, **d}
    return Inventory(
        total=int(fields["total"]),
        reserved=int(fields["reserved"]),
        min_unit=int(fields["min_unit"]),
        max_unit=int(fields["max_unit"]),
        step_size=int(fields["step_size"]),
        allocation_ratio=float(fields["allocation_ratio"]),
    )


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

    @property
    def synced_uuid(self) -> str:
        """The provider's uuid in the service; only a synchronised tree has one."""
        if self.uuid is None:
            raise LookupError(f"provider {self.name} is not synchronised with the service yet")
        return self.uuid

    @property
    def pci_pool(self) -> PciPool:
        """The devices of a PCI provider (kind "pci")."""
        if self.pci is None:
            raise LookupError(f"provider {self.name} is a {self.kind} provider, not a PCI device")
        return self.pci

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "parent": self.parent,
            "kind": self.kind,
            "uuid": self.uuid,
            "inventories": {rc: inventory.as_dict() for rc, inventory in sorted(self.inventories.items())},
            "traits": sorted(self.traits),
            "aggregates": sorted(self.aggregates),
            "cell": self.cell.to_dict() if self.cell else None,
            "pci": self.pci.to_dict() if self.pci else None,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProviderNode:
        return cls(
            name=str(d["name"]),
            parent=None if d.get("parent") is None else str(d["parent"]),
            kind=str(d["kind"]),
            inventories={str(rc): _inventory(inv) for rc, inv in (d.get("inventories") or {}).items()},
            traits={str(t) for t in d.get("traits") or ()},
            aggregates={str(a) for a in d.get("aggregates") or ()},
            cell=CellInfo.from_dict(d["cell"]) if d.get("cell") else None,
            pci=PciPool.from_dict(d["pci"]) if d.get("pci") else None,
            uuid=None if d.get("uuid") is None else str(d["uuid"]),
        )


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
        order: list[ProviderNode] = []
        seen: set[str] = set()

        def visit(node: ProviderNode, path: frozenset[str]) -> None:
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

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def get(self, name: str) -> ProviderNode:
        return self._by_name[name]

    def by_uuid(self, uuid: str) -> ProviderNode:
        for node in self._order:
            if node.uuid == uuid:
                return node
        raise KeyError(f"no provider {uuid} in the tree of {self.root.name}")

    def parent_uuid(self, node: ProviderNode) -> str | None:
        return None if node.parent is None else self._by_name[node.parent].uuid

    def uuids(self) -> set[str]:
        return {n.uuid for n in self._order if n.uuid}

    def holders(self) -> set[str]:
        """The providers that can hold allocations: those with inventory (NUMA cells have none)."""
        return {n.synced_uuid for n in self._order if n.inventories}

    @property
    def cells(self) -> list[CellInfo]:
        return sorted((n.cell for n in self._order if n.cell is not None), key=lambda c: c.id)

    @property
    def pci_providers(self) -> list[ProviderNode]:
        return [n for n in self._order if n.pci is not None]

    def resource_classes(self) -> set[str]:
        return {rc for n in self._order for rc in n.inventories}

    def traits(self) -> set[str]:
        return {t for n in self._order for t in n.traits}

    def to_dict(self) -> list[dict[str, Any]]:
        """The providers, parents before children."""
        return [node.to_dict() for node in self._order]

    @classmethod
    def from_dict(cls, nodes: list[dict[str, Any]]) -> ProviderTree:
        return cls([ProviderNode.from_dict(n) for n in nodes])
