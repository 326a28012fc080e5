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
      faults: {fail_next_spawns: 0, spawn_failure_rate: 0.0, seed: 7}   # berth.tracker.drivers.faults

Guests appear with ``spawn`` (or ``accept_migration``) and disappear with ``destroy`` (or
``migrate_out``); they start instantly and use what their claim holds. ``plant_guest`` (the agent's
``POST /faults/guests/<uuid>``) puts a guest there in no claim, as if started outside the tracker:
an orphan for the audit. Once the tracker names its claim store (``keep_state_beside``) every change
of the guests is written, flushed and renamed into ``<store>.guests.json`` before it is answered, so
a restarted agent knows the guests it ran; guests the driver held before that are kept with those
of the file. The topology can be replaced at any time with ``set_topology`` to model hardware changes.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from berth.domain.host.records import ClaimRecord
from berth.tracker.configuration.config import parse_cpu_set
from berth.tracker.drivers.base import Driver
from berth.tracker.drivers.faults import SpawnFaults
from berth.tracker.errors import ConfigError, SpawnFailed
from berth.tracker.facts import RUNNING, STOPPED, Guest, HostFacts, NumaCell, PciDevice

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
        self.faults = SpawnFaults()
        if not isinstance(topology, FakeTopology):
            topology = dict(topology or {})
            try:
                self.faults.update(topology.pop("faults", None) or {})
            except ValueError as e:
                raise ConfigError(f"fake: {e}") from None
        self._topology = topology if isinstance(topology, FakeTopology) else FakeTopology.from_dict(topology)
        self._guests: dict[str, Guest] = {}
        self._state_path: Path | None = None

    def set_topology(self, topology: dict[str, Any] | FakeTopology) -> None:
        with self._lock:
            self._topology = topology if isinstance(topology, FakeTopology) else FakeTopology.from_dict(topology)

    def host_facts(self) -> HostFacts:
        with self._lock:
            return self._topology.facts

    def guests(self) -> dict[str, Guest]:
        with self._lock:
            return dict(self._guests)

    # -- the guests' file -----------------------------------------------------------------------

    def keep_state_beside(self, store_path: str) -> None:
        """The guests live in ``<store>.guests.json``: an agent killed and restarted finds them again.

        Guests the driver holds already (spawned or planted before the tracker was built) are kept
        beside those of the file, and win over a guest of the same uuid there: they are the newer."""
        with self._lock:
            self._state_path = Path(store_path + ".guests.json")
            saved: dict[str, Guest] = {}
            if self._state_path.exists():
                document = orjson.loads(self._state_path.read_bytes())
                saved = {g["uuid"]: Guest.from_dict(g) for g in document["guests"]}
            self._guests = {**saved, **self._guests}
            self._save()

    def _save(self) -> None:
        """Write the guests (under the lock): a new file, flushed, then renamed over the old one."""
        if self._state_path is None:
            return
        document = {"guests": [g.to_dict() for _, g in sorted(self._guests.items())]}
        temporary = self._state_path.with_name(self._state_path.name + ".tmp")
        with open(temporary, "wb") as handle:
            handle.write(orjson.dumps(document))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self._state_path)

    def _put(self, guest: Guest) -> Guest:
        self._guests[guest.uuid] = guest
        self._save()
        return guest

    # -- the hypervisor side --------------------------------------------------------------------

    def spawn(self, instance_uuid: str, claim: ClaimRecord | None = None) -> Guest:
        """Start the guest (tests may plant one with no claim); fail, or take long, as the faults say."""
        if self.faults.spawn_seconds:
            time.sleep(self.faults.spawn_seconds)  # outside the lock: other guests go on meanwhile
        with self._lock:
            failure = self.faults.next_spawn_fails()
            if failure:
                raise SpawnFailed(f"guest {instance_uuid} did not start: {failure}", reasons=[failure])
            return self._put(_guest_in(instance_uuid, claim))

    def accept_migration(self, instance_uuid: str, claim: ClaimRecord) -> Guest:
        with self._lock:
            return self._put(_guest_in(instance_uuid, claim))

    def migrate_out(self, instance_uuid: str, destination_host: str) -> bool:
        return self.destroy(instance_uuid)

    def power_off(self, instance_uuid: str) -> None:
        with self._lock:
            self._put(replace(self._guests[instance_uuid], state=STOPPED))

    def destroy(self, instance_uuid: str) -> bool:
        with self._lock:
            found = self._guests.pop(instance_uuid, None) is not None
            self._save()
            return found

    def set_faults(self, settings: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.faults.update(settings)
            return self.faults.to_dict()

    def plant_guest(self, guest: Guest) -> Guest:
        with self._lock:
            return self._put(guest)


def _guest_in(instance_uuid: str, claim: ClaimRecord | None) -> Guest:
    if claim is None:
        return Guest(instance_uuid)
    resources: dict[str, int] = {}
    for by_class in claim.allocations.values():
        for resource_class, amount in by_class.items():
            resources[resource_class] = resources.get(resource_class, 0) + amount
    return Guest(instance_uuid, RUNNING, claim.claim_id, resources)
