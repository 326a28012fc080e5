"""What a host's claims use, by provider, NUMA cell and PCI slot.

Usage is summed from claims, never from instance states: a claim in flight is always counted. A
claim is anything with allocations, NUMA cells, PCI devices and an id (``HeldClaim``): the compute
tracker's persisted records, or the assignments a caller has at hand (``HostUsage.add``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from berth.domain.host.allocations import Allocations
from berth.domain.host.assignments import CellAssignment, PciAssignment


class HeldClaim(Protocol):
    """What usage is summed from: one claim's allocations on the host and what it was given."""

    @property
    def claim_id(self) -> str: ...

    @property
    def allocations(self) -> Allocations: ...

    @property
    def numa(self) -> tuple[CellAssignment, ...]: ...

    @property
    def pci(self) -> tuple[PciAssignment, ...]: ...


@dataclass
class HostUsage:
    """What the claims use, by provider, NUMA cell and PCI slot."""

    providers: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    cell_vcpus: Counter[int] = field(default_factory=Counter)
    cell_memory: Counter[int] = field(default_factory=Counter)
    pinned: defaultdict[int, set[int]] = field(default_factory=lambda: defaultdict(set))
    pci: dict[str, str] = field(default_factory=dict)  # slot address -> claim id

    def used(self, provider_uuid: str, resource_class: str) -> int:
        return self.providers.get(provider_uuid, Counter()).get(resource_class, 0)

    def add(
        self,
        allocations: Mapping[str, Mapping[str, int]],
        numa: Iterable[CellAssignment],
        pci: Iterable[PciAssignment],
        claim_id: str,
    ) -> None:
        """Count one claim: its allocations, its guest cells (pinned or floating) and its devices."""
        for rp, resources in allocations.items():
            self.providers[rp].update(resources)
        for cell in numa:
            if cell.pinned_cpus:
                self.pinned[cell.host_cell].update(cell.pinned_cpus)
            else:
                self.cell_vcpus[cell.host_cell] += cell.vcpus
            self.cell_memory[cell.host_cell] += cell.memory_mb
        for device in pci:
            self.pci[device.address] = claim_id

    def add_claim(self, claim: HeldClaim) -> None:
        self.add(claim.allocations, claim.numa, claim.pci, claim.claim_id)

    def provider_totals(self) -> Allocations:
        return {rp: {rc: n for rc, n in c.items() if n} for rp, c in self.providers.items() if +c}

    def to_dict(self) -> dict[str, Any]:
        """JSON: NUMA cells are keyed by their id as a string."""
        cells = sorted(set(self.cell_vcpus) | set(self.cell_memory) | set(self.pinned))
        return {
            "providers": self.provider_totals(),
            "cells": {
                str(cell): {
                    "vcpus": self.cell_vcpus[cell],
                    "memory_mb": self.cell_memory[cell],
                    "pinned_cpus": sorted(self.pinned.get(cell, ())),
                }
                for cell in cells
            },
            "pci": dict(sorted(self.pci.items())),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HostUsage:
        usage = cls()
        for rp, resources in (d.get("providers") or {}).items():
            usage.providers[str(rp)].update({str(rc): int(n) for rc, n in resources.items()})
        for key, cell in (d.get("cells") or {}).items():
            cell_id = int(key)
            if cell.get("vcpus"):
                usage.cell_vcpus[cell_id] = int(cell["vcpus"])
            if cell.get("memory_mb"):
                usage.cell_memory[cell_id] = int(cell["memory_mb"])
            if cell.get("pinned_cpus"):
                usage.pinned[cell_id] = {int(c) for c in cell["pinned_cpus"]}
        usage.pci = {str(slot): str(claim) for slot, claim in (d.get("pci") or {}).items()}
        return usage


def usage_of(claims: Iterable[HeldClaim]) -> HostUsage:
    """The usage of these claims, summed."""
    usage = HostUsage()
    for claim in claims:
        usage.add_claim(claim)
    return usage
