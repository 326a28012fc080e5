"""What a claim is given beyond its allocations: the NUMA cells (with pinned CPUs) its guest's cells
run on, and the PCI devices (or virtual functions) handed to it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CellAssignment:
    guest_cell: int
    host_cell: int
    vcpus: int
    memory_mb: int
    pinned_cpus: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "guest_cell": self.guest_cell,
            "host_cell": self.host_cell,
            "vcpus": self.vcpus,
            "memory_mb": self.memory_mb,
            "pinned_cpus": list(self.pinned_cpus),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CellAssignment:
        return cls(d["guest_cell"], d["host_cell"], d["vcpus"], d["memory_mb"], tuple(d.get("pinned_cpus") or ()))


@dataclass(frozen=True)
class PciAssignment:
    request: int  # index into the flavor's PCI requests
    provider_uuid: str
    device: str  # the provider's device (the PF for a virtual function)
    address: str  # what the guest gets: the device itself or one virtual function
    resource_class: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "request": self.request,
            "provider_uuid": self.provider_uuid,
            "device": self.device,
            "address": self.address,
            "resource_class": self.resource_class,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PciAssignment:
        return cls(d["request"], d["provider_uuid"], d["device"], d["address"], d["resource_class"])


def cells_from(items: list[dict[str, Any]] | None) -> tuple[CellAssignment, ...]:
    return tuple(CellAssignment.from_dict(c) for c in items or ())


def devices_from(items: list[dict[str, Any]] | None) -> tuple[PciAssignment, ...]:
    return tuple(PciAssignment.from_dict(p) for p in items or ())
