"""The host as its claims see it: inventories with their usage, NUMA cells, PCI slots (``GET /capacity``),
and the warnings a report of the host raises when the hardware shrank below what is claimed.

Usage is summed from the persisted claims; capacities are Placement's rule
(``berth.domain.capacity``), applied to NUMA cells with the compute node's ratios.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from berth.domain.host.fitting import CellLimits
from berth.domain.host.records import ClaimRecord
from berth.domain.host.tree import ProviderTree
from berth.domain.host.usage import HostUsage, usage_of
from berth.tracker.configuration.provider_config import ProviderConfig


def capacity_report(
    host: str,
    tree: ProviderTree,
    records: list[ClaimRecord],
    *,
    provider_config: ProviderConfig | None,
    shared_storage: str | None,
) -> dict[str, Any]:
    usage = usage_of(records)
    classes = {}
    if provider_config is not None:
        classes = {
            name: {"units": info.units, "description": info.description}
            for name, info in provider_config.resource_classes.items()
        }
    return {
        "host": host,
        "root_provider_uuid": tree.root.uuid,
        "providers": _providers(tree, usage),
        "cells": _cells(tree, usage),
        "pci": _pci(tree, usage),
        "resource_classes": classes,
        "shared_storage": shared_storage,
        "claims": len(records),
    }


def _providers(tree: ProviderTree, usage: HostUsage) -> dict[str, Any]:
    providers = {}
    for node in tree:
        inventories = {}
        for rc, inventory in node.inventories.items():
            used = usage.used(node.synced_uuid, rc)
            inventories[rc] = {
                **inventory.as_dict(),
                "capacity": inventory.capacity,
                "used": used,
                "free": inventory.capacity - used,
            }
        providers[node.synced_uuid] = {
            "name": node.name,
            "kind": node.kind,
            "parent_uuid": tree.parent_uuid(node),
            "inventories": inventories,
            "traits": sorted(node.traits),
        }
    return providers


def _cells(tree: ProviderTree, usage: HostUsage) -> list[dict[str, Any]]:
    limits = CellLimits.of(tree)
    return [
        {
            "id": cell.id,
            "shared_cpus": sorted(cell.shared_cpus),
            "dedicated_cpus": sorted(cell.dedicated_cpus),
            "memory_mb": cell.memory_mb,
            "vcpus_capacity": limits.vcpus(cell).capacity,
            "vcpus_used": usage.cell_vcpus[cell.id],
            "memory_capacity": limits.memory_mb(cell).capacity,
            "memory_used": usage.cell_memory[cell.id],
            "pinned_cpus": sorted(usage.pinned.get(cell.id, ())),
        }
        for cell in tree.cells
    ]


def _pci(tree: ProviderTree, usage: HostUsage) -> list[dict[str, Any]]:
    return [
        {
            "provider_uuid": node.uuid,
            "device": node.pci_pool.address,
            "numa_node": node.pci_pool.numa_node,
            "resource_class": node.pci_pool.resource_class,
            "vendor_id": node.pci_pool.vendor_id,
            "product_id": node.pci_pool.product_id,
            "slots": {slot: usage.pci.get(slot) for slot in node.pci_pool.slots},
        }
        for node in tree.pci_providers
    ]


def shrink_warnings(tree: ProviderTree, records: Iterable[ClaimRecord]) -> list[str]:
    """Providers whose claims exceed what the host now has, and claims on providers it no longer reports."""
    records = list(records)
    usage = usage_of(records)
    warnings = []
    for node in tree:
        for rc, inventory in node.inventories.items():
            used = usage.used(node.synced_uuid, rc)
            if not inventory.has_room(used, 0):
                warnings.append(
                    f"{node.name} is over capacity: {used} {rc} claimed, "
                    f"{inventory.capacity} available; new claims are refused"
                )
    reported = tree.uuids()
    for record in records:
        lost = set(record.allocations) - reported
        if lost:
            warnings.append(
                f"claim {record.claim_id} of {record.instance_uuid} uses providers "
                f"the host no longer reports: {', '.join(sorted(lost))}"
            )
    return warnings
