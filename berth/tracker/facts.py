"""What a driver reports about its host: hardware facts and the guests the hypervisor runs.

A driver answers two questions: what hardware does this host have (``HostFacts``: CPUs, NUMA cells,
memory, disk, PCI devices) and which guests does the hypervisor run (``Guest``). Everything
policy-like (host reservations, allocation ratios, which PCI devices may be handed to guests, extra
resources from the provider config) is applied on top of the facts by ``berth.tracker.hosttree``,
the same way for every driver, so a fake host and a real one produce trees of the same shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NumaCell:
    id: int
    cpus: frozenset[int]
    memory_mb: int


@dataclass(frozen=True)
class PciDevice:
    address: str  # domain:bus:slot.function, e.g. "0000:81:00.0"
    vendor_id: str  # four lower-case hex digits, no "0x"
    product_id: str
    numa_node: int | None = None  # None when the platform does not say
    class_code: str = ""  # six hex digits, e.g. "020000" for an Ethernet controller
    physfn: str | None = None  # for a virtual function: its physical function's address
    vfs: tuple[str, ...] = ()  # for a physical function: its virtual functions' addresses

    @property
    def is_vf(self) -> bool:
        return self.physfn is not None


@dataclass(frozen=True)
class HostFacts:
    cpus: frozenset[int]  # online logical CPUs
    memory_mb: int
    disk_gb: int
    cells: tuple[NumaCell, ...]
    pci_devices: tuple[PciDevice, ...] = ()


# What a guest is doing, as its hypervisor says.
RUNNING = "running"
STOPPED = "stopped"
SHELVED = "shelved"
GUEST_STATES = (RUNNING, STOPPED, SHELVED)


@dataclass(frozen=True)
class Guest:
    """A guest the hypervisor has, whatever the books say."""

    uuid: str
    state: str = RUNNING
    # The claim the guest was spawned (or accepted) with; None for a guest nobody here started.
    claim_id: str | None = None
    # What the hypervisor knows the guest uses ({"VCPU": 2, "MEMORY_MB": 2048, ...}), if it knows.
    resources: dict[str, int] | None = None

    @property
    def running(self) -> bool:
        return self.state == RUNNING

    def to_dict(self) -> dict[str, Any]:
        return {"uuid": self.uuid, "state": self.state, "claim_id": self.claim_id, "resources": self.resources}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Guest:
        resources = data.get("resources")
        return cls(
            uuid=str(data["uuid"]),
            state=str(data.get("state", RUNNING)),
            claim_id=data.get("claim_id"),
            resources=None if resources is None else {str(k): int(v) for k, v in resources.items()},
        )
