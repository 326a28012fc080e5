"""update_available_resource: the driver's tree pushed to a real ``berth serve``."""

from __future__ import annotations

import pytest
from trackerhelpers import GPU, TOPOLOGY, assert_books_agree, flavor, instance, new_uuid

from berth.clients.errors import ClaimFailed, GenerationConflict
from berth.clients.placement import PlacementClient
from berth.domain.host.request import PciRequest
from berth.tracker.configuration.provider_config import load_provider_configs


def _tree(placement, root_uuid):
    return {p["name"]: p for p in placement.providers_in_tree(root_uuid)}


def test_first_report_creates_the_whole_tree(hosts, placement, tmp_path):
    config = tmp_path / "extra.toml"
    config.write_text("""
[resource_classes.CUSTOM_FPGA_SLOT]
units = "slot"
description = "FPGA slots on the accelerator shelf"

[[providers]]
identification = {name = "$COMPUTE_NODE_SHELF"}
inventories = {CUSTOM_FPGA_SLOT = {total = 4, max_unit = 2}}
traits = ["CUSTOM_SHELF"]
""")
    host = hosts(
        reserved={"VCPU": 1, "MEMORY_MB": 1024, "DISK_GB": 10},
        allocation_ratios={"VCPU": 2.0, "MEMORY_MB": 1.5},
        pci_device_spec=[
            {"vendor_id": "10de", "traits": ["CUSTOM_GPU_BIG"]},
            {"vendor_id": "8086", "product_id": "1572"},
        ],
        provider_config=str(config),
    )
    name = host.host
    tree = _tree(placement, host.tree.root.uuid)
    root = host.tree.root.uuid
    assert {
        n: (
            p["parent_provider_uuid"]
            and next(q["name"] for q in tree.values() if q["uuid"] == p["parent_provider_uuid"])
        )
        for n, p in tree.items()
    } == {
        name: None,
        f"{name}_NUMA0": name,
        f"{name}_NUMA1": name,
        f"{name}_0000:81:00.0": f"{name}_NUMA0",
        f"{name}_0000:c1:00.0": f"{name}_NUMA1",
        f"{name}_0000:c2:00.0": f"{name}_NUMA1",
        f"{name}_SHELF": name,
    }

    _, inventories = placement.get_inventories(root)
    assert inventories["VCPU"] == {
        "total": 8,
        "reserved": 1,
        "min_unit": 1,
        "max_unit": 8,
        "step_size": 1,
        "allocation_ratio": 2.0,
    }
    assert inventories["MEMORY_MB"]["total"] == 16384 and inventories["MEMORY_MB"]["reserved"] == 1024
    assert inventories["MEMORY_MB"]["allocation_ratio"] == 1.5
    assert inventories["DISK_GB"]["total"] == 100 and inventories["DISK_GB"]["reserved"] == 10
    assert placement.get_inventories(tree[f"{name}_0000:c2:00.0"]["uuid"])[1]["SRIOV_NET_VF"]["total"] == 4
    assert placement.get_inventories(tree[f"{name}_0000:81:00.0"]["uuid"])[1][GPU]["total"] == 1
    assert placement.get_inventories(tree[f"{name}_SHELF"]["uuid"])[1]["CUSTOM_FPGA_SLOT"]["max_unit"] == 2
    assert placement.get_traits(root)[1] == {"COMPUTE_NODE"}
    assert placement.get_traits(tree[f"{name}_NUMA1"]["uuid"])[1] == {"HW_NUMA_ROOT"}
    assert placement.get_traits(tree[f"{name}_0000:81:00.0"]["uuid"])[1] == {
        "COMPUTE_MANAGED_PCI_DEVICE",
        "CUSTOM_GPU_BIG",
    }
    assert placement.get_traits(tree[f"{name}_SHELF"]["uuid"])[1] == {"CUSTOM_SHELF"}

    again = host.update_available_resource()
    assert not again.changed  # a second report writes nothing
    assert_books_agree(host)


def test_hardware_changes_update_reparent_add_and_remove_providers(hosts, placement):
    host = hosts()
    name = host.host
    changed = {
        "cells": [{"cpus": 4, "memory_mb": 8192}, {"cpus": 4, "memory_mb": 16384}],
        "disk_gb": 200,
        "pci_devices": [
            # moved from cell 0 to cell 1, one device gone, one new
            {"address": "0000:81:00.0", "vendor_id": "10de", "product_id": "1eb8", "numa_node": 1},
            {"address": "0000:c2:00.0", "vendor_id": "8086", "product_id": "1572", "numa_node": 1, "vfs": 8},
            {"address": "0000:d1:00.0", "vendor_id": "10de", "product_id": "1eb8", "numa_node": 0},
        ],
    }
    host.driver.set_topology(changed)
    result = host.update_available_resource()
    assert result.reparented == [f"{name}_0000:81:00.0"]
    assert result.created == [f"{name}_0000:d1:00.0"]
    assert result.removed == [f"{name}_0000:c1:00.0"]
    assert set(result.inventories_updated) == {name, f"{name}_0000:c2:00.0", f"{name}_0000:d1:00.0"}
    tree = _tree(placement, host.tree.root.uuid)
    assert tree[f"{name}_0000:81:00.0"]["parent_provider_uuid"] == tree[f"{name}_NUMA1"]["uuid"]
    assert placement.get_inventories(host.tree.root.uuid)[1]["MEMORY_MB"]["total"] == 24576
    assert placement.get_inventories(tree[f"{name}_0000:c2:00.0"]["uuid"])[1]["SRIOV_NET_VF"]["total"] == 8
    assert host.tree.get(f"{name}_0000:81:00.0").pci.numa_node == 1
    assert_books_agree(host)

    host.driver.set_topology(TOPOLOGY)
    host.update_available_resource()
    assert set(_tree(placement, host.tree.root.uuid)) == {n.name for n in host.tree}
    assert_books_agree(host)


def test_what_is_in_use_is_kept_until_freed_and_a_shrunk_host_is_reported_over_capacity(hosts, placement):
    host = hosts()
    name = host.host
    inst = instance(flavor(6, 1024, 10, pci=(PciRequest(1, vendor_id="10de", product_id="1eb8"),)))
    claim = host.instance_claim(inst)
    device = claim.pci[0].device
    # Half the CPUs, no local disk any more, and the instance's GPU gone.
    host.driver.set_topology(
        {
            **TOPOLOGY,
            "cells": [{"cpus": 2, "memory_mb": 8192}, {"cpus": 2, "memory_mb": 8192}],
            "disk_gb": 0,
            "pci_devices": [d for d in TOPOLOGY["pci_devices"] if d["address"] != device],
        }
    )
    result = host.update_available_resource()
    assert list(result.kept) == [f"{name}_{device}"]
    assert result.leftover_uuids == {claim.pci[0].provider_uuid}
    assert any("DISK_GB kept at 100 while 10 are allocated" in w for w in result.warnings)
    assert any("over capacity: 6 VCPU claimed, 4 available" in w for w in result.warnings)
    assert any(claim.claim_id in w for w in result.warnings)
    inventories = placement.get_inventories(host.tree.root.uuid)[1]
    assert inventories["VCPU"]["total"] == 4 and inventories["DISK_GB"]["total"] == 100
    assert host.audit(heal=False).consistent  # the books still agree with each other
    with pytest.raises(ClaimFailed):
        host.instance_claim(instance(flavor(1, 512)))

    claim.abort()
    result = host.update_available_resource()
    assert result.removed == [f"{name}_{device}"]
    assert "DISK_GB" not in placement.get_inventories(host.tree.root.uuid)[1]
    assert result.warnings == []
    assert_books_agree(host)


def test_generation_conflicts_are_refreshed_and_retried(hosts, placement, placement_service):
    host = hosts()
    root = host.tree.root.uuid
    other = PlacementClient(placement_service.url)
    conflicts = []
    real_set = host.placement.set_inventories

    def racing_set(uuid, generation, inventories):
        if not conflicts:
            # Another writer changes the provider between our read and our write.
            gen, traits = other.get_traits(uuid)
            other.set_traits(uuid, gen, traits | {"HW_CPU_X86_AVX2"})
        try:
            return real_set(uuid, generation, inventories)
        except GenerationConflict as e:
            conflicts.append(e)
            raise

    host.placement.set_inventories = racing_set
    host.config.reserved["MEMORY_MB"] = 2048
    host.update_available_resource()
    assert len(conflicts) == 1
    assert placement.get_inventories(root)[1]["MEMORY_MB"]["reserved"] == 2048
    assert "HW_CPU_X86_AVX2" not in placement.get_traits(root)[1]  # the host owns its traits
    assert_books_agree(host)


def test_providers_named_for_the_host_are_adopted_wherever_they_are(hosts, placement):
    name = f"host-{new_uuid()[:8]}"
    existing_root = new_uuid()
    placement.create_provider(name, existing_root)  # registered earlier by another tool
    stray_cell = new_uuid()
    placement.create_provider(f"{name}_NUMA1", stray_cell)  # a leftover root of the same name
    host = hosts(name)
    assert host.tree.root.uuid == existing_root
    assert host.tree.get(f"{name}_NUMA1").uuid == stray_cell
    assert _tree(placement, existing_root)[f"{name}_NUMA1"]["parent_provider_uuid"] == existing_root
    assert_books_agree(host)


def test_provider_config_children_follow_the_file(hosts, placement, tmp_path):
    config = tmp_path / "extra.yaml"

    def write(parent):
        config.write_text(f"""
resource_classes:
  CUSTOM_CRYPTO_QUEUE: {{units: queue, description: Hardware crypto queues}}
providers:
  - identification: {{name: $COMPUTE_NODE_CRYPTO}}
    parent: {parent}
    inventories: {{CUSTOM_CRYPTO_QUEUE: 16}}
""")

    write("$COMPUTE_NODE_NUMA0")
    host = hosts(provider_config=str(config))
    name = host.host
    assert host.tree.get(f"{name}_CRYPTO").parent == f"{name}_NUMA0"
    write("$COMPUTE_NODE_NUMA1")
    host.config.provider_config = load_provider_configs([config])  # what an agent restart would read
    result = host.update_available_resource()
    assert result.reparented == [f"{name}_CRYPTO"]
    host.instance_claim(instance(flavor(1, 512, resources={"CUSTOM_CRYPTO_QUEUE": 4})))
    assert_books_agree(host)


def test_the_disabled_status_a_conductor_set_is_kept_by_the_hosts_own_reports(hosts, placement):
    """An operator disabled the host through the conductors (the trait on its compute node); the
    host's next reports rewrite its traits but keep that one, until a conductor removes it."""
    host = hosts()
    root = host.tree.root.uuid
    placement.ensure_trait("CUSTOM_STRAY")
    generation, traits = placement.get_traits(root)
    placement.set_traits(root, generation, traits | {"COMPUTE_STATUS_DISABLED", "CUSTOM_STRAY"})
    host.update_available_resource()
    kept = placement.get_traits(root)[1]
    assert "COMPUTE_STATUS_DISABLED" in kept
    assert "CUSTOM_STRAY" not in kept
    generation, traits = placement.get_traits(root)
    placement.set_traits(root, generation, traits - {"COMPUTE_STATUS_DISABLED"})
    host.update_available_resource()
    assert "COMPUTE_STATUS_DISABLED" not in placement.get_traits(root)[1]
