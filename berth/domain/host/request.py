"""What an instance asks of a host: a flavor (vCPUs, memory, disk, a NUMA topology, PCI devices,
other resources) and the instance it is for. Requests arrive as JSON (the compute agent's API, a
scheduler's request spec) and are checked here before anything is fitted; a malformed one raises
``InvalidHostRequest``.
"""

from __future__ import annotations

import uuid as uuidlib
from dataclasses import dataclass, field
from typing import Any

from berth.domain.host.anti_affinity import AntiAffinity
from berth.domain.host.errors import InvalidHostRequest
from berth.domain.host.tree import ProviderNode

CPU_POLICIES = ("shared", "dedicated")
NUMA_POLICIES = ("required", "preferred")


@dataclass(frozen=True)
class NumaRequest:
    """A guest NUMA topology: ``cells`` guest cells, each on a different host cell."""

    cells: int = 1
    cell_vcpus: tuple[int, ...] | None = None  # default: the flavor's vCPUs split evenly
    cell_memory_mb: tuple[int, ...] | None = None  # default: its memory split evenly

    def guest_cells(self, vcpus: int, memory_mb: int) -> list[tuple[int, int]]:
        """(vCPUs, memory) of each guest cell."""
        if self.cells < 1:
            raise InvalidHostRequest("a NUMA topology has at least one cell")
        cpus = list(self.cell_vcpus) if self.cell_vcpus else _split(vcpus, self.cells)
        memory = list(self.cell_memory_mb) if self.cell_memory_mb else _split(memory_mb, self.cells)
        if len(cpus) != self.cells or len(memory) != self.cells:
            raise InvalidHostRequest("cell_vcpus and cell_memory_mb need one entry per guest cell")
        if sum(cpus) != vcpus or sum(memory) != memory_mb:
            raise InvalidHostRequest("the guest cells' vCPUs and memory must add up to the flavor's")
        if min(cpus) < 1 or min(memory) < 1:
            raise InvalidHostRequest("every guest cell needs at least one vCPU and some memory")
        return list(zip(cpus, memory, strict=True))

    def to_dict(self) -> dict[str, Any]:
        return {
            "cells": self.cells,
            "cell_vcpus": list(self.cell_vcpus) if self.cell_vcpus else None,
            "cell_memory_mb": list(self.cell_memory_mb) if self.cell_memory_mb else None,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NumaRequest:
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

    def matches(self, node: ProviderNode) -> bool:
        pool = node.pci_pool
        return (
            (self.resource_class is None or self.resource_class == pool.resource_class)
            and (self.vendor_id is None or self.vendor_id.lower() == pool.vendor_id)
            and (self.product_id is None or self.product_id.lower() == pool.product_id)
            and set(self.traits) <= node.traits
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "resource_class": self.resource_class,
            "vendor_id": self.vendor_id,
            "product_id": self.product_id,
            "traits": list(self.traits),
            "numa_policy": self.numa_policy,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PciRequest:
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
    resources: dict[str, int] = field(default_factory=dict)  # any other class: {"CUSTOM_LICENSE_SEAT": 1}

    def validate(self) -> None:
        if self.vcpus < 1 or self.memory_mb < 1 or self.disk_gb < 0:
            raise InvalidHostRequest("a flavor needs at least one vCPU and some memory, and no negative disk")
        if self.cpu_policy not in CPU_POLICIES:
            raise InvalidHostRequest(f"cpu_policy is one of {', '.join(CPU_POLICIES)}")
        for rc, amount in self.resources.items():
            if rc in ("VCPU", "PCPU", "MEMORY_MB", "DISK_GB"):
                raise InvalidHostRequest(f"{rc} comes from the flavor's own fields, not from resources")
            if not isinstance(amount, int) or amount < 0:
                raise InvalidHostRequest(f"resources.{rc} must be a whole number")
        for request in self.pci:
            if request.count < 1 or request.numa_policy not in NUMA_POLICIES:
                raise InvalidHostRequest(f"invalid PCI request {request.describe()}")
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

    def to_dict(self) -> dict[str, Any]:
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
    def from_dict(cls, d: dict[str, Any]) -> Flavor:
        try:
            return cls(
                name=str(d.get("name", "")),
                vcpus=int(d["vcpus"]),
                memory_mb=int(d["memory_mb"]),
                disk_gb=int(d.get("disk_gb", 0)),
                cpu_policy=d.get("cpu_policy", "shared"),
                numa=NumaRequest.from_dict(d["numa"]) if d.get("numa") is not None else None,
                pci=tuple(PciRequest.from_dict(p) for p in d.get("pci") or ()),
                resources={str(k): int(v) for k, v in (d.get("resources") or {}).items()},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:  # AttributeError: a list, a string for a mapping
            raise InvalidHostRequest(f"invalid flavor: {e}") from None


@dataclass(frozen=True)
class InstanceSpec:
    uuid: str
    flavor: Flavor
    project_id: str
    user_id: str
    # The anti-affinity group the instance is a member of, checked again by the host's claim.
    anti_affinity: AntiAffinity | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "uuid": self.uuid,
            "flavor": self.flavor.to_dict(),
            "project_id": self.project_id,
            "user_id": self.user_id,
        }
        if self.anti_affinity is not None:
            d["anti_affinity"] = self.anti_affinity.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> InstanceSpec:
        try:
            return cls(
                uuid=str(uuidlib.UUID(d["uuid"])),
                flavor=Flavor.from_dict(d["flavor"]),
                project_id=str(d["project_id"]),
                user_id=str(d["user_id"]),
                anti_affinity=AntiAffinity.from_dict(d["anti_affinity"]) if d.get("anti_affinity") else None,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InvalidHostRequest(f"invalid instance: {e}") from None
