"""Fitting requests to a host: resources, NUMA cells, pinned CPUs and PCI devices (no I/O)."""

from __future__ import annotations

import pytest
from trackerhelpers import GPU, TOPOLOGY, flavor

from berth.domain.host.errors import DoesNotFit
from berth.domain.host.fitting import plan_claim
from berth.domain.host.records import ClaimRecord
from berth.domain.host.request import NumaRequest, PciRequest
from berth.domain.host.usage import usage_of
from berth.tracker.configuration.config import TrackerConfig
from berth.tracker.drivers.fake import FakeDriver


def _tree(**config):
    config = TrackerConfig.from_dict(
        {
            "reserved": {"MEMORY_MB": 0},
            "allocation_ratios": {"VCPU": 1.0},
            "pci_device_spec": [{"vendor_id": "10de"}, {"vendor_id": "8086", "product_id": "1572"}],
            **config,
        }
    )
    tree = FakeDriver(TOPOLOGY).provider_tree("h", config)
    for node in tree:
        node.uuid = f"uuid-{node.name}"
    return tree


def _record(plan, flv):
    return ClaimRecord.new(
        host="h",
        instance_uuid="i",
        consumer_uuid="i",
        kind="instance",
        state="active",
        project_id="p",
        user_id="u",
        flavor=flv,
        allocations=plan.allocations,
        numa=plan.numa,
        pci=plan.pci,
    )


def _fill(tree, *flavors):
    records = []
    for flv in flavors:
        records.append(_record(plan_claim(flv, tree, usage_of(records)), flv))
    return usage_of(records)


def test_uneven_split_and_explicit_guest_cells():
    tree = _tree()
    plan = plan_claim(flavor(5, 3000, numa=NumaRequest(2)), tree, usage_of([]))
    assert [(c.vcpus, c.memory_mb) for c in plan.numa] == [(3, 1500), (2, 1500)]
    plan = plan_claim(
        flavor(4, 3000, numa=NumaRequest(2, cell_vcpus=(1, 3), cell_memory_mb=(1000, 2000))), tree, usage_of([])
    )
    assert [(c.host_cell, c.vcpus, c.memory_mb) for c in plan.numa] == [(0, 1, 1000), (1, 3, 2000)]


def test_a_full_cell_sends_the_guest_to_the_other_one():
    tree = _tree()
    usage = _fill(tree, flavor(4, 1024, numa=NumaRequest(1)))
    plan = plan_claim(flavor(2, 1024, numa=NumaRequest(1)), tree, usage)
    assert plan.numa[0].host_cell == 1
    # 3 + 3 in the cells: the host has 2 vCPUs free, but no single cell does.
    usage = _fill(tree, flavor(3, 1024, numa=NumaRequest(1)), flavor(3, 1024, numa=NumaRequest(1)))
    assert (usage.cell_vcpus[0], usage.cell_vcpus[1]) == (3, 3)
    with pytest.raises(DoesNotFit, match="NUMA cell 1: 1 vCPUs free, 2 asked"):
        plan_claim(flavor(2, 512, numa=NumaRequest(1)), tree, usage)
    assert plan_claim(flavor(2, 512), tree, usage).numa == ()  # a floating guest still fits


def test_numa_memory_is_checked_per_cell():
    tree = _tree()
    with pytest.raises(DoesNotFit, match="MB free"):
        plan_claim(flavor(1, 9000, numa=NumaRequest(1)), tree, usage_of([]))
    assert plan_claim(flavor(1, 9000), tree, usage_of([])).numa == ()  # a floating guest fits


def test_floating_guests_do_not_take_cell_capacity_but_do_take_host_capacity():
    tree = _tree()
    usage = _fill(tree, flavor(6, 1024))
    plan_claim(flavor(2, 1024, numa=NumaRequest(1)), tree, usage)
    with pytest.raises(DoesNotFit, match="VCPU on h"):
        plan_claim(flavor(3, 1024, numa=NumaRequest(1)), tree, usage)


def test_pinned_cpus_are_chosen_per_cell_and_never_reused():
    tree = _tree(cpu_dedicated_set="2-3,6-7")
    assert tree.root.inventories["PCPU"].total == 4 and tree.root.inventories["VCPU"].total == 4
    usage = _fill(tree, flavor(2, 512, cpu_policy="dedicated"))
    plan = plan_claim(flavor(2, 512, cpu_policy="dedicated"), tree, usage)
    assert plan.numa[0].pinned_cpus == (6, 7)
    assert plan.allocations["uuid-h"] == {"PCPU": 2, "MEMORY_MB": 512, "DISK_GB": 1}
    # One pinned CPU taken in each cell: two free on the host, but not two together.
    usage = _fill(tree, flavor(1, 512, cpu_policy="dedicated"))
    usage.pinned[1].add(6)
    usage.providers["uuid-h"]["PCPU"] += 1
    with pytest.raises(DoesNotFit, match="1 free dedicated CPUs, 2 asked"):
        plan_claim(flavor(2, 512, cpu_policy="dedicated"), tree, usage)


def test_pci_numa_policies():
    tree = _tree()
    # The guest goes to cell 0; only cell 1 has VFs.
    usage = _fill(tree, flavor(4, 512, numa=NumaRequest(1), name="cell1-filler"))
    assert usage.cell_vcpus[0] == 4
    required = flavor(
        1, 512, numa=NumaRequest(1), pci=(PciRequest(1, resource_class="SRIOV_NET_VF", numa_policy="required"),)
    )
    plan = plan_claim(required, tree, usage)
    assert plan.numa[0].host_cell == 1 and plan.pci[0].device == "0000:c2:00.0"

    gpu_local = flavor(1, 512, numa=NumaRequest(1), pci=(PciRequest(1, resource_class=GPU),))
    plan = plan_claim(gpu_local, tree, usage_of([]))
    assert plan.numa[0].host_cell == 0 and plan.pci[0].device == "0000:81:00.0"  # preferred: local first

    usage = _fill(tree, flavor(1, 512, pci=(PciRequest(1, resource_class=GPU),)))  # takes the cell 0 GPU
    plan = plan_claim(gpu_local, tree, usage)
    assert plan.numa[0].host_cell == 0 and plan.pci[0].device == "0000:c1:00.0"  # preferred: remote is fine
    strict = flavor(1, 512, numa=NumaRequest(1), pci=(PciRequest(1, resource_class=GPU, numa_policy="required"),))
    assert plan_claim(strict, tree, usage).numa[0].host_cell == 1  # required: moves the guest
    usage.cell_vcpus[1] = 4  # cell 1 is full
    assert plan_claim(gpu_local, tree, usage).numa[0].host_cell == 0
    with pytest.raises(DoesNotFit, match="on the guest's NUMA cells"):
        plan_claim(strict, tree, usage)


def test_pci_requests_match_vendor_product_and_traits():
    tree = _tree(
        pci_device_spec=[{"vendor_id": "10de", "address": "0000:81:*", "traits": ["CUSTOM_A"]}, {"vendor_id": "10de"}]
    )
    assert (
        plan_claim(flavor(1, 1, pci=(PciRequest(1, traits=("CUSTOM_A",)),)), tree, usage_of([])).pci[0].device
        == "0000:81:00.0"
    )
    assert (
        plan_claim(flavor(1, 1, pci=(PciRequest(2, vendor_id="10DE", product_id="1eb8"),)), tree, usage_of([]))
        .pci[1]
        .device
        == "0000:c1:00.0"
    )
    with pytest.raises(DoesNotFit, match="0 of 1 devices free"):
        plan_claim(flavor(1, 1, pci=(PciRequest(1, vendor_id="8086"),)), tree, usage_of([]))


def test_every_shortage_is_named():
    with pytest.raises(DoesNotFit) as failure:
        plan_claim(flavor(64, 10**6, 10**4), _tree(), usage_of([]))
    assert [r.split(":")[0] for r in failure.value.reasons] == ["VCPU on h", "MEMORY_MB on h", "DISK_GB on h"]
