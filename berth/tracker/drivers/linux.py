"""The host this process runs on, read from Linux's sysfs and procfs.

- CPUs: ``/sys/devices/system/cpu/online``;
- NUMA cells: ``/sys/devices/system/node/node<N>/cpulist`` and ``.../meminfo`` (one cell holding every
  CPU and all memory when the kernel exposes no nodes);
- memory: ``MemTotal`` of ``/proc/meminfo``;
- disk: the size of the file system holding the instances directory (or its nearest existing parent);
- PCI devices: ``/sys/bus/pci/devices/*`` (vendor, device, class, numa_node, physfn, virtfn*).

Guests are the entries of the instances directory named by an instance uuid, the layout a hypervisor
driver keeps (``<instances_path>/<uuid>/``).  The roots of sysfs and procfs can be moved for tests.
"""

from __future__ import annotations

import logging
import os
import re
import uuid as uuidlib
from pathlib import Path

from berth.tracker.configuration.config import parse_cpu_set
from berth.tracker.drivers.base import Driver
from berth.tracker.facts import Guest, HostFacts, NumaCell, PciDevice

LOG = logging.getLogger(__name__)
_NODE = re.compile(r"^node(\d+)$")


class LinuxDriver(Driver):
    name = "linux"

    def __init__(self, instances_path: str, *, sysfs: str = "/sys", procfs: str = "/proc"):
        self.instances_path = Path(instances_path)
        self.sysfs = Path(sysfs)
        self.procfs = Path(procfs)

    # -- facts ----------------------------------------------------------------------------------

    def host_facts(self) -> HostFacts:
        cpus = self.online_cpus()
        memory_mb = self.memory_mb()
        return HostFacts(
            cpus=cpus,
            memory_mb=memory_mb,
            disk_gb=self.disk_gb(),
            cells=self.numa_cells(cpus, memory_mb),
            pci_devices=self.pci_devices(),
        )

    def online_cpus(self) -> frozenset[int]:
        text = _read(self.sysfs / "devices/system/cpu/online")
        if text:
            return parse_cpu_set(text)
        return frozenset(range(os.cpu_count() or 1))

    def memory_mb(self) -> int:
        return _meminfo_total_kb(self.procfs / "meminfo") // 1024

    def numa_cells(self, cpus: frozenset[int], memory_mb: int) -> tuple[NumaCell, ...]:
        nodes_dir = self.sysfs / "devices/system/node"
        cells = []
        if nodes_dir.is_dir():
            for entry in sorted(nodes_dir.iterdir(), key=lambda p: p.name):
                match = _NODE.match(entry.name)
                if not match:
                    continue
                node_cpus = parse_cpu_set(_read(entry / "cpulist") or "") & cpus
                node_memory = _meminfo_total_kb(entry / "meminfo") // 1024
                if not node_cpus and not node_memory:
                    continue  # a memory-less, CPU-less node (e.g. hot-plug placeholder)
                cells.append(NumaCell(id=int(match.group(1)), cpus=frozenset(node_cpus), memory_mb=node_memory))
        if not cells:
            cells = [NumaCell(id=0, cpus=cpus, memory_mb=memory_mb)]
        return tuple(sorted(cells, key=lambda c: c.id))

    def disk_path(self) -> Path:
        """The instances directory, or its nearest existing parent while it is not created yet."""
        path = self.instances_path.resolve()
        while not path.exists():
            path = path.parent
        return path

    def disk_gb(self) -> int:
        stat = os.statvfs(self.disk_path())
        return stat.f_blocks * stat.f_frsize // 2**30

    def pci_devices(self) -> tuple[PciDevice, ...]:
        root = self.sysfs / "bus/pci/devices"
        if not root.is_dir():
            return ()
        devices = []
        for entry in sorted(root.iterdir(), key=lambda p: p.name):
            vendor = _hex(_read(entry / "vendor"))
            product = _hex(_read(entry / "device"))
            if vendor is None or product is None:
                continue
            numa = _read(entry / "numa_node")
            numa_node = int(numa) if numa and numa.lstrip("-").isdigit() and int(numa) >= 0 else None
            physfn = entry / "physfn"
            vfs = sorted(os.path.basename(os.readlink(p)) for p in entry.glob("virtfn*") if p.is_symlink())
            devices.append(
                PciDevice(
                    address=entry.name,
                    vendor_id=vendor,
                    product_id=product,
                    numa_node=numa_node,
                    class_code=(_read(entry / "class") or "").lower().removeprefix("0x"),
                    physfn=os.path.basename(os.readlink(physfn)) if physfn.is_symlink() else None,
                    vfs=tuple(vfs),
                )
            )
        return tuple(devices)

    # -- guests ---------------------------------------------------------------------------------

    def guests(self) -> dict[str, Guest]:
        if not self.instances_path.is_dir():
            return {}
        found = {}
        for entry in self.instances_path.iterdir():
            try:
                instance = str(uuidlib.UUID(entry.name))
            except ValueError:
                continue
            found[instance] = Guest(instance)
        return found


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _hex(text: str | None) -> str | None:
    if not text:
        return None
    text = text.lower().removeprefix("0x")
    return text.rjust(4, "0") if all(c in "0123456789abcdef" for c in text) else None


def _meminfo_total_kb(path: Path) -> int:
    """``MemTotal`` in kB from /proc/meminfo or a node's meminfo (``Node 0 MemTotal: ... kB``)."""
    text = _read(path) or ""
    for line in text.splitlines():
        fields = line.replace(":", " ").split()
        if "MemTotal" in fields:
            return int(fields[fields.index("MemTotal") + 1])
    return 0
