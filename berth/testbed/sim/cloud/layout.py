"""The simulated cloud's make-up, drawn from the seed: hosts of mixed sizes (NUMA cells, GPUs, SR-IOV
NICs, pinned CPUs, some on a shared disk pool), their availability zones, the flavors
the workload asks for and the PCI aliases they name."""

from __future__ import annotations

import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

from berth.scheduler.request.flavor import Flavor, PciAlias, SchedulerConfig

# Every uuid the layout makes is derived from the seed's namespace, so a run is reproducible.
NAMESPACE: Final = uuid.UUID("5f0d3a52-33c1-4a43-9b1c-6f4d0d7a2b90")

GPU: Final = {"vendor_id": "10de", "product_id": "1eb8"}
NIC: Final = {"vendor_id": "8086", "product_id": "1572"}
PCI_DEVICE_SPEC: Final = [{"vendor_id": "10de"}, {"vendor_id": "8086", "product_id": "1572"}]
GPU_ALIAS: Final = PciAlias("gpu", vendor_id=GPU["vendor_id"], product_id=GPU["product_id"])

# What kinds of host there are, and how many of each in a hundred.
HOST_KINDS: Final[dict[str, tuple[int, dict[str, Any]]]] = {
    "small": (30, {"cells": [{"cpus": 8, "memory_mb": 16384}], "disk_gb": 200}),
    "numa": (30, {"cells": [{"cpus": 8, "memory_mb": 16384}] * 2, "disk_gb": 400}),
    "gpu": (
        15,
        {
            "cells": [{"cpus": 8, "memory_mb": 32768}] * 2,
            "disk_gb": 400,
            "pci_devices": [
                {"address": "0000:81:00.0", **GPU, "numa_node": 0},
                {"address": "0000:c1:00.0", **GPU, "numa_node": 1},
            ],
        },
    ),
    "sriov": (
        15,
        {
            "cells": [{"cpus": 8, "memory_mb": 16384}] * 2,
            "disk_gb": 400,
            "pci_devices": [{"address": "0000:c2:00.0", **NIC, "numa_node": 1, "vfs": 8}],
        },
    ),
    # Half of each cell's CPUs pinned (PCPU), half floating (VCPU).
    "pinned": (10, {"cells": [{"cpus": 8, "memory_mb": 16384}] * 2, "disk_gb": 400}),
}
PINNED_SETS: Final = {"cpu_dedicated_set": "4-7,12-15", "cpu_shared_set": "0-3,8-11"}
ZONES: Final = ("az1", "az2", "az3")
# Shared disk pools, and the share of the small and NUMA hosts that use one.
POOLS: Final = 2
POOL_SHARE: Final = 0.3
POOL_DISK_GB: Final = 1_000_000


@dataclass(frozen=True)
class FlavorChoice:
    flavor: Flavor
    weight: int
    # Flavors a resize of this one may go to (plain flavors resize among themselves).
    resizable: bool = False


FLAVORS: Final = (
    FlavorChoice(Flavor("m1.small", 1, 1024, root_gb=5), 30, resizable=True),
    FlavorChoice(Flavor("m1.medium", 2, 2048, root_gb=10), 20, resizable=True),
    # A large server preempted is offloaded (it may be unshelved later); the others are deleted.
    FlavorChoice(
        Flavor("m1.large", 4, 8192, root_gb=20, extra_specs={"berth:preemption_action": "shelve_offload"}),
        8,
        resizable=True,
    ),
    FlavorChoice(Flavor("numa.one", 2, 2048, root_gb=10, extra_specs={"hw:numa_nodes": "1"}), 8),
    FlavorChoice(Flavor("numa.two", 4, 4096, root_gb=10, extra_specs={"hw:numa_nodes": "2"}), 6),
    FlavorChoice(Flavor("pinned", 2, 2048, root_gb=10, extra_specs={"hw:cpu_policy": "dedicated"}), 6),
    FlavorChoice(Flavor("gpu", 4, 8192, root_gb=20, extra_specs={"pci_passthrough:alias": "gpu:1"}), 5),
    # Granular groups: the two VCPUs asked in two groups, which may land on one provider or two.
    # (A device class asked in a group, resources1:SRIOV_NET_VF, is refused by every agent: see
    # docs/sim.md, "Known gaps".)
    FlavorChoice(
        Flavor(
            "granular",
            2,
            2048,
            root_gb=10,
            extra_specs={"resources:VCPU": "0", "resources1:VCPU": "1", "resources2:VCPU": "1", "group_policy": "none"},
        ),
        5,
    ),
)


# The priority of the flavors that preempt (``--preemptible``); the others are at 0, preemptible.
HIGH_PRIORITY: Final = 10


def high_priority(choice: FlavorChoice) -> FlavorChoice:
    """The flavor's twin above the preemptible level (named ``<name>.hi``): its builds preempt
    servers of the preemptible flavors when nothing fits; it is not resized (the plain flavors
    resize among themselves, at priority 0)."""
    f = choice.flavor
    specs = {**f.extra_specs, "berth:priority": str(HIGH_PRIORITY)}
    twin = Flavor(f"{f.name}.hi", f.vcpus, f.memory_mb, f.root_gb, f.ephemeral_gb, f.swap_mb, specs)
    return FlavorChoice(twin, choice.weight)


HIGH_FLAVORS: Final = tuple(high_priority(c) for c in FLAVORS)


@dataclass(frozen=True)
class HostSpec:
    name: str
    kind: str
    zone: str
    # The shared disk pool's index, or None for a local disk.
    pool: int | None
    # Whether the host runs as a ``berth agent`` process of its own (which faults may kill).
    real: bool
    # The tracker's configuration (docs/tracker.md), the fake driver's topology included.
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Layout:
    seed: int
    hosts: tuple[HostSpec, ...]
    # Pool index -> (sharing provider uuid, aggregate uuid).
    pools: dict[int, tuple[str, str]]

    @property
    def scheduler_config(self) -> SchedulerConfig:
        return SchedulerConfig(
            pci_aliases={GPU_ALIAS.name: GPU_ALIAS},
            # Filters that read the agents' snapshots read one per candidate: keep the candidates few.
            max_placement_results=40,
        )

    def kinds(self) -> Counter[str]:
        return Counter(h.kind for h in self.hosts)


def named_uuid(seed: int, name: str) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{seed}/{name}"))


def make_layout(hosts: int, real_agents: int, seed: int) -> Layout:
    """``hosts`` hosts, the first ``real_agents`` of which run as agent processes."""
    rng = random.Random(seed)
    pools = {i: (named_uuid(seed, f"pool/{i}"), named_uuid(seed, f"pool-aggregate/{i}")) for i in range(POOLS)}
    kinds = list(HOST_KINDS)
    weights = [HOST_KINDS[k][0] for k in kinds]
    specs = []
    for i in range(hosts):
        kind = rng.choices(kinds, weights)[0]
        pool = rng.randrange(POOLS) if kind in ("small", "numa") and rng.random() < POOL_SHARE else None
        specs.append(
            HostSpec(
                name=f"sim-{i:04d}",
                kind=kind,
                zone=ZONES[i % len(ZONES)],
                pool=pool,
                real=i < real_agents,
                config=host_config(kind, None if pool is None else pools[pool]),
            )
        )
    return Layout(seed, tuple(specs), pools)


def host_config(kind: str, pool: tuple[str, str] | None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "reserved": {"MEMORY_MB": 0},
        "allocation_ratios": {"VCPU": 2.0, "MEMORY_MB": 1.0, "DISK_GB": 1.0},
        "pci_device_spec": PCI_DEVICE_SPEC,
        "fake": HOST_KINDS[kind][1],
        # The run audits every host itself at the end; a periodic audit would only cost CPU.
        "audit": {"interval": 0, "heal": False},
    }
    if kind == "pinned":
        config.update(PINNED_SETS)
    if pool is not None:
        config["shared_storage"] = {"provider_uuid": pool[0], "aggregate_uuid": pool[1]}
    return config
