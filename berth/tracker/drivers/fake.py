"""A host made up from configuration, for tests and the simulator.

    fake:
      cells:                               # NUMA cells; CPUs are numbered across cells in order
        - {cpus: 4, memory_mb: 8192}       # cpus: a count, or a CPU set such as "0-3,8-11"
        - {cpus: 4, memory_mb: 8192}
      memory_mb: 16384                     # default: the cells' sum
      disk_gb: 200
      pci_devices:
        - {address: "0000:81:00.0", vendor_id: "10de", product_id: "1eb8", numa_node: 0}
        - {address: "0000:82:00.0", vendor_id: "8086", product_id: "1572", numa_node: 1, vfs: 4}

Guests appear when a test (or the simulator) calls ``spawn`` and disappear with ``destroy``; the
topology can be replaced at any time with ``set_topology`` to model hardware changes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from berth.tracker.config import parse_cpu_set
from berth.tracker.drivers.base import Driver
from berth.tracker.errors import ConfigError
from berth.tracker.facts import Guest, HostFacts, NumaCell, PciDevice

DEFAULT_TOPOLOGY = {
    "cells": [{"cpus": 4, "memory_mb": 8192}, {"cpus": 4, "memory_mb": 8192}],
    "disk_gb": 200,
    "pci_devices": [],
}


@dataclass(frozen=True)
class FakeTopology:
    facts: HostFacts

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> FakeTopology:
        data = {**DEFAULT_TOPOLOGY, **(data or {})}
        unknown = sorted(set(data) - {"cells", "memory_mb", "disk_gb", "pci_devices"})
        if unknown:
            raise ConfigError(f"fake: unknown keys: {', '.join(unknown)}")
        cells, next_cpu = [], 0
        for index, cell in enumerate(data["cells"] or []):
            cpus = cell.get("cpus", 1)
            cpu_set = frozenset(range(next_cpu, next_cpu + cpus)) if isinstance(cpus, int) else parse_cpu_set(cpus)
            next_cpu = max(cpu_set, default=next_cpu - 1) + 1
            cells.append(NumaCell(id=int(cell.get("id", index)), cpus=cpu_set, memory_mb=int(cell["memory_mb"])))
        if not cells:
            raise ConfigError("fake: a host needs at least one cell")
        all_cpus = frozenset().union(*(c.cpus for c in cells))
        if sum(len(c.cpus) for c in cells) != len(all_cpus):
            raise ConfigError("fake: two cells share a CPU")
        devices = []
        for item in data["pci_devices"] or []:
            address = item["address"]
            vfs = tuple(_vf_address(address, i) for i in range(int(item.get("vfs", 0))))
            numa = item.get("numa_node")
            pf = PciDevice(
                address=address,
                vendor_id=str(item["vendor_id"]).lower(),
                product_id=str(item["product_id"]).lower(),
                numa_node=None if numa is None else int(numa),
                class_code=str(item.get("class_code", "")),
                vfs=vfs,
            )
            devices.append(pf)
            for vf in vfs:
                devices.append(
                    PciDevice(
                        address=vf,
                        vendor_id=pf.vendor_id,
                        product_id=str(item.get("vf_product_id", pf.product_id)).lower(),
                        numa_node=pf.numa_node,
                        class_code=pf.class_code,
                        physfn=address,
                    )
                )
        memory = int(data.get("memory_mb") or sum(c.memory_mb for c in cells))
        return cls(
            HostFacts(
                cpus=all_cpus,
                memory_mb=memory,
                disk_gb=int(data["disk_gb"]),
                cells=tuple(cells),
                pci_devices=tuple(devices),
            )
        )


def _vf_address(pf_address: str, index: int) -> str:
    domain, bus, rest = pf_address.split(":")
    slot = int(rest.split(".")[0], 16)
    return f"{domain}:{int(bus, 16) + 1:02x}:{slot + index // 8:02x}.{index % 8}"


class FakeDriver(Driver):
    name = "fake"

    def __init__(self, topology: dict[str, Any] | FakeTopology | None = None):
        self._lock = threading.Lock()
        self._topology = topology if isinstance(topology, FakeTopology) else FakeTopology.from_dict(topology)
        self._guests: dict[str, Guest] = {}

    def set_topology(self, topology: dict[str, Any] | FakeTopology) -> None:
        with self._lock:
            self._topology = topology if isinstance(topology, FakeTopology) else FakeTopology.from_dict(topology)

    def host_facts(self) -> HostFacts:
        with self._lock:
            return self._topology.facts

    def guests(self) -> dict[str, Guest]:
        with self._lock:
            return dict(self._guests)

    # -- the hypervisor side, driven by tests and the simulator ---------------------------------

    def spawn(self, instance_uuid: str, resources: dict[str, int] | None = None) -> None:
        with self._lock:
            self._guests[instance_uuid] = Guest(instance_uuid, True, resources)

    def power_off(self, instance_uuid: str) -> None:
        with self._lock:
            guest = self._guests[instance_uuid]
            self._guests[instance_uuid] = Guest(guest.uuid, False, guest.resources)

    def destroy(self, instance_uuid: str) -> None:
        with self._lock:
            self._guests.pop(instance_uuid, None)
