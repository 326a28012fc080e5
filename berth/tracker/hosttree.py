"""From a driver's facts and the configuration to the tree of providers a host reports.

    <host>                       compute node: VCPU, PCPU, MEMORY_MB, DISK_GB; trait COMPUTE_NODE
    ├── <host>_NUMA0             a NUMA cell: trait HW_NUMA_ROOT; its CPUs and memory are tracked by
    │   └── <host>_0000:81:00.0  the tracker's claims, which pick cells; PCI devices hang below the
    └── <host>_NUMA1             cell they are attached to (or the compute node when unknown)
        └── <host>_<custom>      children a provider config file adds

The compute node keeps VCPU and MEMORY_MB so that plain flavors (``resources=VCPU:2,MEMORY_MB:2048``)
keep working without granular request groups; which cell and which pinned CPUs an instance uses is
the tracker's business, persisted with its claim.  PCI devices are providers of their own, one per
device (total 1) or one per physical function (total = its virtual functions), so that Placement
counts exactly the devices the claims hand out.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from berth.domain.capacity import Inventory
from berth.domain.host.tree import CellInfo, PciPool, ProviderNode, ProviderTree
from berth.tracker.configuration.config import PciDeviceSpec, TrackerConfig, format_cpu_set
from berth.tracker.configuration.provider_config import ProviderConfig
from berth.tracker.errors import ProviderConfigError
from berth.tracker.facts import HostFacts, PciDevice

LOG = logging.getLogger(__name__)

COMPUTE_TRAIT = "COMPUTE_NODE"
NUMA_TRAIT = "HW_NUMA_ROOT"
PCI_TRAIT = "COMPUTE_MANAGED_PCI_DEVICE"


def cell_provider_name(host: str, cell_id: int) -> str:
    return f"{host}_NUMA{cell_id}"


def pci_provider_name(host: str, address: str) -> str:
    return f"{host}_{address}"


def default_pci_resource_class(vendor_id: str, product_id: str) -> str:
    return f"CUSTOM_PCI_{vendor_id.upper()}_{product_id.upper()}"


def cpu_sets(facts: HostFacts, config: TrackerConfig) -> tuple[frozenset[int], frozenset[int]]:
    """(shared, dedicated) online CPUs, as configured."""
    online = facts.cpus
    for name, wanted in (("cpu_dedicated_set", config.cpu_dedicated_set), ("cpu_shared_set", config.cpu_shared_set)):
        if wanted is not None and wanted - online:
            LOG.warning("%s names CPUs that are not online, ignored: %s", name, format_cpu_set(wanted - online))
    dedicated = (config.cpu_dedicated_set or frozenset()) & online
    shared = config.cpu_shared_set & online if config.cpu_shared_set is not None else online - dedicated
    return frozenset(shared), frozenset(dedicated)


def _root_inventory(total: int, config: TrackerConfig, rc: str, ratio: float | None = None) -> Inventory | None:
    if total <= 0:
        return None
    reserved = min(config.reserved_of(rc), total)
    return Inventory(
        total=total, reserved=reserved, max_unit=total, allocation_ratio=config.ratio(rc) if ratio is None else ratio
    )


def build_provider_tree(
    host: str, facts: HostFacts, config: TrackerConfig, provider_config: ProviderConfig | None = None
) -> ProviderTree:
    shared, dedicated = cpu_sets(facts, config)
    root = ProviderNode(name=host, parent=None, kind="compute", traits={COMPUTE_TRAIT})
    candidates = [
        ("VCPU", _root_inventory(len(shared), config, "VCPU")),
        # Pinned CPUs are never over-committed, whatever the ratios say.
        ("PCPU", _root_inventory(len(dedicated), config, "PCPU", ratio=1.0)),
        ("MEMORY_MB", _root_inventory(facts.memory_mb, config, "MEMORY_MB")),
    ]
    if config.shared_storage is None:
        candidates.append(("DISK_GB", _root_inventory(facts.disk_gb, config, "DISK_GB")))
    else:
        if config.shared_storage.aggregate_uuid:
            root.aggregates.add(config.shared_storage.aggregate_uuid)
    root.inventories = {rc: inv for rc, inv in candidates if inv is not None}
    nodes = [root]

    cell_names: dict[int, str] = {}
    for cell in sorted(facts.cells, key=lambda c: c.id):
        name = cell_provider_name(host, cell.id)
        cell_names[cell.id] = name
        nodes.append(
            ProviderNode(
                name=name,
                parent=host,
                kind="numa",
                traits={NUMA_TRAIT},
                cell=CellInfo(
                    id=cell.id,
                    shared_cpus=frozenset(cell.cpus & shared),
                    dedicated_cpus=frozenset(cell.cpus & dedicated),
                    memory_mb=cell.memory_mb,
                ),
            )
        )

    nodes.extend(_pci_nodes(host, facts, config, cell_names))
    if provider_config is not None:
        nodes = _apply_provider_config(host, nodes, provider_config)
    return ProviderTree(nodes)


def _pci_nodes(host: str, facts: HostFacts, config: TrackerConfig, cell_names: dict[int, str]) -> list[ProviderNode]:
    """One provider per passthrough device, or per physical function for its virtual functions."""
    if not config.pci_device_spec:
        return []
    by_address = {d.address: d for d in facts.pci_devices}
    # provider device address -> (device, spec, slots)
    pools: dict[str, tuple[PciDevice, PciDeviceSpec, tuple[str, ...]]] = {}
    for device in sorted(facts.pci_devices, key=lambda d: d.address):
        spec = next((s for s in config.pci_device_spec if s.matches(device)), None)
        if spec is None:
            continue
        if device.physfn is not None:
            parent = by_address.get(device.physfn)
            if parent is None:
                LOG.warning("virtual function %s has no physical function %s; skipped", device.address, device.physfn)
                continue
            if parent.address in pools and pools[parent.address][2] == (parent.address,):
                LOG.warning(
                    "%s is passed through whole; its virtual function %s is skipped", parent.address, device.address
                )
                continue
            entry = pools.setdefault(parent.address, (parent, spec, ()))
            if device.address not in entry[2]:
                pools[parent.address] = (entry[0], entry[1], tuple(sorted(entry[2] + (device.address,))))
        elif device.vfs:
            # A matched physical function offers its virtual functions (those seen so far stay).
            entry = pools.get(device.address, (device, spec, ()))
            pools[device.address] = (device, spec, tuple(sorted(set(entry[2]) | set(device.vfs))))
        else:
            pools[device.address] = (device, spec, (device.address,))

    nodes = []
    for address, (device, spec, slots) in sorted(pools.items()):
        whole = slots == (address,)
        rc = spec.resource_class or (
            default_pci_resource_class(device.vendor_id, device.product_id) if whole else "SRIOV_NET_VF"
        )
        cell_name = cell_names.get(device.numa_node) if device.numa_node is not None else None
        nodes.append(
            ProviderNode(
                name=pci_provider_name(host, address),
                parent=cell_name or host,
                kind="pci",
                inventories={rc: Inventory(total=len(slots), max_unit=len(slots))},
                traits={PCI_TRAIT, *spec.traits},
                pci=PciPool(
                    address=address,
                    vendor_id=device.vendor_id,
                    product_id=device.product_id,
                    numa_node=device.numa_node if cell_name else None,
                    resource_class=rc,
                    slots=slots,
                ),
            )
        )
    return nodes


def _apply_provider_config(host: str, nodes: list[ProviderNode], provider_config: ProviderConfig) -> list[ProviderNode]:
    by_name = {n.name: n for n in nodes}
    nodes = list(nodes)
    for entry in provider_config.providers:
        name = entry.resolved_name(host)
        node = by_name.get(name)
        if node is not None:
            if entry.parent is not None:
                raise ProviderConfigError(
                    f"{entry.source}: {entry.name} is reported by the driver; its parent cannot be configured"
                )
            clash = sorted(set(entry.inventories) & set(node.inventories))
            if clash:
                raise ProviderConfigError(f"{entry.source}: {entry.name} already reports {', '.join(clash)}")
            node.inventories.update({rc: replace(inv) for rc, inv in entry.inventories.items()})
            node.traits |= entry.traits
        else:
            node = ProviderNode(
                name=name,
                parent=entry.resolved_parent(host),
                kind="custom",
                inventories={rc: replace(inv) for rc, inv in entry.inventories.items()},
                traits=set(entry.traits),
            )
            by_name[name] = node
            nodes.append(node)
    try:
        ProviderTree(nodes)
    except ValueError as e:
        raise ProviderConfigError(f"provider config: {e}") from None
    return nodes
