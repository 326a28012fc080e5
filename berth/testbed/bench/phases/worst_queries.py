"""The worst candidate queries: those whose answers are small or empty while the search behind them
may have to look at the whole cloud, and the two largest answers a scheduler asks for.

- ``nothing_fits``: more memory than any host has room for, no limit: every host is a non-answer;
- ``beyond_max_unit``: more memory than any host's ``max_unit`` but within its capacity (its size
  times its ratio), no limit: every host has room and none takes it in one allocation;
- ``sharing_only``: more disk than any host has, so only the hosts of a sharing aggregate fit;
- ``rare_trait`` / ``rare_aggregate``: a trait, an aggregate (``member_of``) of 1 % of the hosts;
- ``limit_1000``: the basic request with the limit Nova sends by default;
- ``wide_tree``: 8 granular groups of one PCI device each, isolated, on hosts with 8 identical
  devices (:mod:`.wide_trees`): 8! ways to place them per host.
"""

from __future__ import annotations

from math import factorial
from typing import Any

from berth.testbed.bench.cloud import (
    HOST_INVENTORY,
    RARE_AGGREGATE_RESIDUE,
    RARE_TRAIT,
    RARE_TRAIT_RESIDUE,
    is_rare,
    rare_host_count,
    sharing_host_count,
)
from berth.testbed.bench.phases.wide_trees import PCI_CLASS, PCI_PER_HOST, wide_host_count, wide_tree_query

FLAVOR = "resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20"
_MEMORY = HOST_INVENTORY["MEMORY_MB"]
TOO_MUCH_MEMORY = int(2 * _MEMORY["total"] * _MEMORY["allocation_ratio"])
BEYOND_MAX_UNIT = 300_000
MORE_THAN_LOCAL_DISK = HOST_INVENTORY["DISK_GB"]["total"] + 1000

WORST_VARIANTS = {
    "nothing_fits": f"resources=VCPU:2,MEMORY_MB:{TOO_MUCH_MEMORY},DISK_GB:20",
    "beyond_max_unit": f"resources=VCPU:2,MEMORY_MB:{BEYOND_MAX_UNIT}",
    "sharing_only": f"resources=VCPU:2,MEMORY_MB:4096,DISK_GB:{MORE_THAN_LOCAL_DISK}&limit=50",
    "rare_trait": f"{FLAVOR}&required={RARE_TRAIT}&limit=50",
    "rare_aggregate": FLAVOR + "&member_of={rare_aggregate}&limit=50",
    "limit_1000": f"{FLAVOR}&limit=1000",
    "wide_tree": wide_tree_query(),
}


def worst_queries(layout: dict[str, Any]) -> dict[str, str]:
    """The queries, with the layout's own aggregate filled in."""
    return {name: query.format(rare_aggregate=layout["rare_aggregate"]) for name, query in WORST_VARIANTS.items()}


def worst_expected_counts(hosts: int, cap: int) -> dict[str, int]:
    """Allocation requests each worst variant should return on the untouched layout."""
    sharing_hosts = sharing_host_count(hosts)
    return {
        "nothing_fits": 0,
        "beyond_max_unit": 0,
        "sharing_only": min(50, sharing_hosts),
        "rare_trait": min(50, rare_host_count(hosts, RARE_TRAIT_RESIDUE)),
        "rare_aggregate": min(50, rare_host_count(hosts, RARE_AGGREGATE_RESIDUE)),
        "limit_1000": min(1000, cap, hosts + sharing_hosts),
        "wide_tree": min(50, wide_host_count(hosts) * factorial(PCI_PER_HOST)),
    }


def worst_layout_sets(layout: dict[str, Any]) -> dict[str, set[str]]:
    hosts = layout["hosts"]
    return {
        "rare_trait": {u for i, u in enumerate(hosts) if is_rare(i, RARE_TRAIT_RESIDUE)},
        "rare_aggregate": {u for i, u in enumerate(hosts) if is_rare(i, RARE_AGGREGATE_RESIDUE)},
        "pci": set(layout.get("pci", [])),
        "wide_hosts": set(layout.get("wide_hosts", [])),
    }


def check_worst_variant(name: str, body: dict[str, Any], layout_sets: dict[str, set[str]]) -> str | None:
    """A sanity check of what a worst variant returned; a message when something looks wrong."""
    for request in body.get("allocation_requests", []):
        allocations = request["allocations"]
        roots = set(allocations) & layout_sets["hosts"]
        if name in ("nothing_fits", "beyond_max_unit"):
            return f"{name}: an allocation request where nothing fits: {request}"
        if name == "sharing_only":
            disk = [rp for rp, a in allocations.items() if "DISK_GB" in a["resources"]]
            if disk != [rp for rp in disk if rp in layout_sets["sharing"]] or not disk:
                return f"{name}: the disk does not come from a sharing provider: {request}"
        if name in ("rare_trait", "rare_aggregate", "wide_tree"):
            wanted = layout_sets["wide_hosts" if name == "wide_tree" else name]
            if not roots or not roots <= wanted:
                return f"{name}: an allocation request on host(s) {sorted(roots)} outside the {name} hosts"
        if name == "wide_tree":
            devices = [rp for rp, a in allocations.items() if PCI_CLASS in a["resources"]]
            if len(devices) != PCI_PER_HOST or not set(devices) <= layout_sets["pci"]:
                return f"{name}: not {PCI_PER_HOST} distinct PCI devices: {request}"
    return None
