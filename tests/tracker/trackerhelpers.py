"""Helpers of the tracker tests: topologies, flavors, instances, and the check that the service,
the tracker's store and its capacity view agree."""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict

from berth.domain.host.records import ACTIVE, INCOMING, OUTGOING, SHELVED, SOFT_DELETED
from berth.domain.host.request import Flavor, InstanceSpec
from berth.domain.host.usage import usage_of
from berth.tracker.store import ClaimStore

# Two cells of four CPUs and 8 GB; a GPU on each cell; a NIC with four virtual functions on cell 1.
TOPOLOGY = {
    "cells": [{"cpus": 4, "memory_mb": 8192}, {"cpus": 4, "memory_mb": 8192}],
    "disk_gb": 100,
    "pci_devices": [
        {"address": "0000:81:00.0", "vendor_id": "10de", "product_id": "1eb8", "numa_node": 0},
        {"address": "0000:c1:00.0", "vendor_id": "10de", "product_id": "1eb8", "numa_node": 1},
        {"address": "0000:c2:00.0", "vendor_id": "8086", "product_id": "1572", "numa_node": 1, "vfs": 4},
    ],
}
# One cell, no devices: for tests about the claim life cycle rather than the hardware.
SMALL = {"cells": [{"cpus": 4, "memory_mb": 8192}], "disk_gb": 100}
GPU = "CUSTOM_PCI_10DE_1EB8"
BASE_CONFIG = {
    "reserved": {"MEMORY_MB": 0},
    "allocation_ratios": {"VCPU": 1.0},
    "pci_device_spec": [{"vendor_id": "10de"}, {"vendor_id": "8086", "product_id": "1572"}],
}


def flavor(vcpus=1, memory_mb=512, disk_gb=1, name=None, **kw) -> Flavor:
    return Flavor(name or f"f{vcpus}-{memory_mb}-{disk_gb}", vcpus, memory_mb, disk_gb, **kw)


def instance(flv=None, **kw) -> InstanceSpec:
    return InstanceSpec(str(uuid.uuid4()), flv or flavor(**kw), "project-1", "user-1")


def new_uuid() -> str:
    return str(uuid.uuid4())


def _nonzero(d) -> dict:
    return {k: v for k, v in d.items() if v}


def assert_books_agree(*trackers):
    """Placement, the persisted claims and each tracker's capacity view tell the same story."""
    for tracker in trackers:
        records = tracker.store.all()
        assert not [r for r in records if r.pending_op], "operations left half done"
        _assert_store_reads_back(tracker, records)
        capacity = tracker.capacity()
        _assert_usages_agree(tracker, records, capacity)
        _assert_consumers_agree(tracker, records)
        _assert_cells_and_devices_agree(records, capacity)
        report = tracker.audit(heal=False)
        assert report.consistent, report.to_dict()["findings"]


def _assert_store_reads_back(tracker, records):
    """What is in the store file is what a restarted tracker would read."""
    reread = ClaimStore(tracker.store.path)
    try:
        assert sorted(reread.all(), key=lambda r: r.claim_id) == sorted(records, key=lambda r: r.claim_id)
    finally:
        reread.close()


def _assert_usages_agree(tracker, records, capacity):
    usage = usage_of(records)
    for node in tracker.tree:
        if not node.inventories:
            assert not usage.providers.get(node.uuid)
            continue
        placement_usage = _nonzero(tracker.placement.usages(node.uuid))
        claimed = _nonzero(usage.providers.get(node.uuid, Counter()))
        assert placement_usage == claimed, f"{node.name}: Placement {placement_usage} != claims {claimed}"
        view = capacity["providers"][node.uuid]["inventories"]
        assert _nonzero({rc: v["used"] for rc, v in view.items()}) == claimed
        for rc, v in view.items():
            assert 0 <= v["used"] <= v["capacity"], f"{node.name} {rc} over capacity: {v}"


def _assert_consumers_agree(tracker, records):
    """Consumer by consumer: who holds what on this host."""
    placement = tracker.placement
    actual = defaultdict(dict)
    for rp in {n.uuid for n in tracker.tree if n.inventories} | tracker.leftover_providers:
        for consumer, resources in placement.provider_allocations(rp).items():
            actual[consumer][rp] = resources
    expected = defaultdict(lambda: defaultdict(Counter))
    for record in records:
        for rp, resources in record.allocations.items():
            expected[record.consumer_uuid][rp].update(resources)
    expected = {c: {rp: dict(r) for rp, r in by_rp.items()} for c, by_rp in expected.items()}
    assert dict(actual) == expected

    for record in records:
        state = placement.consumer(record.consumer_uuid)
        assert state.consumer_type == ("MIGRATION" if record.state == OUTGOING else "INSTANCE")
        assert state.project_id == record.project_id
        if record.state in (ACTIVE, INCOMING, SOFT_DELETED, SHELVED):
            assert state.on(set(record.shared_allocations)) == record.shared_allocations


def _assert_cells_and_devices_agree(records, capacity):
    """NUMA cells and devices: nothing over its capacity, nothing given twice."""
    slots = [d.address for r in records for d in r.pci]
    assert len(slots) == len(set(slots)), "a PCI device is claimed twice"
    pinned = [cpu for r in records for c in r.numa for cpu in c.pinned_cpus]
    assert len(pinned) == len(set(pinned)), "a CPU is pinned twice"
    for cell in capacity["cells"]:
        assert cell["vcpus_used"] <= cell["vcpus_capacity"]
        assert cell["memory_used"] <= cell["memory_capacity"]
        assert set(cell["pinned_cpus"]) <= set(cell["dedicated_cpus"])
