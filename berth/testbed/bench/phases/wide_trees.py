"""Wide symmetric trees for the worst candidate query: 1 % of the hosts get eight identical PCI
devices as children, each a provider of its own, added after the layout (so that the build's figures
stay those of the usual cloud) when the variant ``wide_tree`` is measured."""

from __future__ import annotations

import time
from typing import Any

from berth.testbed.bench import log
from berth.testbed.bench.cloud import RARE_EVERY, is_rare, rare_host_count
from berth.testbed.client import Client
from berth.testbed.layout import ProviderSpec, create_tree
from berth.testbed.parallel import Stop, parallel

WIDE_TREE_RESIDUE = 9  # odd and not ending in 1: no GPU child, no sharing aggregate, no rare trait
PCI_PER_HOST = 8
PCI_CLASS = "PCI_DEVICE"
PCI_INVENTORY = {PCI_CLASS: {"total": 1}}


def wide_host_count(hosts: int) -> int:
    return rare_host_count(hosts, WIDE_TREE_RESIDUE)


def wide_tree_query(devices: int = PCI_PER_HOST, limit: int = 50) -> str:
    """A host's CPU and memory plus ``devices`` granular groups of one device each, none sharing one."""
    groups = "&".join(f"resources{n}={PCI_CLASS}:1" for n in range(1, devices + 1))
    return f"resources=VCPU:2,MEMORY_MB:4096&{groups}&group_policy=isolate&limit={limit}"


def add_wide_trees(client: Client, layout: dict[str, Any], threads: int, stop: Stop) -> dict[str, Any]:
    """Give the hosts ``i % 100 == 9`` their PCI children; their uuids go to ``layout["pci"]``."""
    wide = [(i, uuid) for i, uuid in enumerate(layout["hosts"]) if is_rare(i, WIDE_TREE_RESIDUE)]
    started = time.perf_counter()

    def devices(host: tuple[int, str]) -> list[str]:
        i, uuid = host
        return [
            create_tree(client, ProviderSpec(f"cn-{i}-pci-{k}", inventory=PCI_INVENTORY), uuid)[0]
            for k in range(PCI_PER_HOST)
        ]

    made = parallel(
        wide,
        threads,
        devices,
        stop,
        client=client,
        progress=lambda done: log(f"  wide trees built: {done}/{len(wide)}"),
    )
    layout["pci"] = [uuid for tree in made for uuid in tree]
    layout["wide_hosts"] = [uuid for _, uuid in wide]
    return {
        "wide_tree_hosts": len(wide),
        "pci_per_host": PCI_PER_HOST,
        "every": RARE_EVERY,
        "providers": len(layout["pci"]),
        "seconds": round(time.perf_counter() - started, 2),
    }
