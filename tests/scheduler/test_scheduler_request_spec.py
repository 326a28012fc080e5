"""build_request_spec: each translation of a flavor, its extra specs and an image."""

from __future__ import annotations

import pytest
from schedulerhelpers import CONFIG, OTHER_AGGREGATE, ZONE_AGGREGATE, flavor, group, spec

from berth.domain.host.request import NumaRequest, PciRequest
from berth.scheduler.request.flavor import SchedulerConfig


def test_a_plain_flavor_asks_for_its_vcpus_memory_and_disk():
    result = spec(flavor_=flavor(vcpus=2, memory_mb=2048, root_gb=20, ephemeral_gb=5, swap_mb=1500))
    assert [g.suffix for g in result.groups] == [""]
    # swap counts in whole GiB, rounded up: 1500 MB is 2 GiB
    assert group(result).resources == {"VCPU": 2, "MEMORY_MB": 2048, "DISK_GB": 27}
    host = result.host_request
    assert (host.vcpus, host.memory_mb, host.disk_gb, host.cpu_policy) == (2, 2048, 27, "shared")
    assert host.numa is None and host.pci == () and host.resources == {}
    assert result.root_forbidden == {"COMPUTE_STATUS_DISABLED"}
    assert result.limit == 1000 and result.group_policy is None
    assert (result.project_id, result.user_id, result.num_instances) == ("project", "user", 1)


def test_a_flavor_without_disk_asks_for_none():
    assert "DISK_GB" not in group(spec(flavor_=flavor(root_gb=0))).resources


def test_resources_extra_specs_override_the_flavor_and_zero_removes():
    result = spec({"resources:DISK_GB": "0", "resources:VCPU": "2", "resources:CUSTOM_LICENSE": "1"})
    assert group(result).resources == {"VCPU": 2, "MEMORY_MB": 4096, "CUSTOM_LICENSE": 1}
    host = result.host_request
    assert (host.vcpus, host.disk_gb, host.resources) == (2, 0, {"CUSTOM_LICENSE": 1})


def test_granular_groups_take_their_suffixed_resources_and_traits():
    result = spec(
        {
            "resources1:CUSTOM_FPGA": "1",
            "trait1:CUSTOM_FPGA_INTEL": "required",
            "resources_gpu-a:VGPU": "2",
            "trait_gpu-a:CUSTOM_OLD": "forbidden",
            "trait:HW_CPU_X86_AVX2": "required",
            "group_policy": "isolate",
        }
    )
    assert [g.suffix for g in result.groups] == ["", "1", "_gpu-a"]
    assert group(result, "1").resources == {"CUSTOM_FPGA": 1}
    assert group(result, "1").required == {"CUSTOM_FPGA_INTEL"}
    assert group(result, "_gpu-a").forbidden == {"CUSTOM_OLD"}
    assert group(result).required == {"HW_CPU_X86_AVX2"}
    assert result.group_policy == "isolate"
    assert result.host_request.resources == {"CUSTOM_FPGA": 1, "VGPU": 2}


def test_a_standard_class_named_in_any_group_is_not_added_again():
    result = spec({"resources1:VCPU": "4", "resources1:MEMORY_MB": "4096"})
    assert group(result).resources == {"DISK_GB": 10}
    assert group(result, "1").resources == {"VCPU": 4, "MEMORY_MB": 4096}
    assert (result.host_request.vcpus, result.host_request.memory_mb) == (4, 4096)


def test_a_suffixed_group_left_empty_by_zeros_goes():
    assert [g.suffix for g in spec({"resources1:CUSTOM_X": "0"}).groups] == [""]


def test_image_traits_join_the_unsuffixed_group():
    result = spec({"trait:CUSTOM_A": "required"}, {"trait:HW_CPU_X86_AVX": "required", "os_distro": "ubuntu"})
    assert group(result).required == {"CUSTOM_A", "HW_CPU_X86_AVX"}


@pytest.mark.parametrize(
    ("extra_specs", "image", "pcpus"),
    [
        ({"hw:cpu_policy": "dedicated"}, {}, 4),
        ({}, {"hw_cpu_policy": "dedicated"}, 4),
        ({"resources:PCPU": "4"}, {}, 4),
    ],
)
def test_pinned_cpus_are_asked_as_pcpu_with_one_numa_cell(extra_specs, image, pcpus):
    result = spec(extra_specs, image)
    assert group(result).resources["PCPU"] == pcpus and "VCPU" not in group(result).resources
    host = result.host_request
    assert host.cpu_policy == "dedicated" and host.vcpus == pcpus
    assert host.numa == NumaRequest(1)


def test_a_shared_policy_keeps_vcpu():
    result = spec({"hw:cpu_policy": "shared"})
    assert group(result).resources["VCPU"] == 4 and result.host_request.numa is None


@pytest.mark.parametrize(
    ("policy", "required", "forbidden"),
    [
        ("require", {"HW_CPU_HYPERTHREADING"}, set()),
        ("isolate", set(), {"HW_CPU_HYPERTHREADING"}),
        ("prefer", set(), set()),
    ],
)
def test_thread_policy_becomes_the_hyperthreading_trait(policy, required, forbidden):
    result = spec({"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": policy})
    assert group(result).required == required and group(result).forbidden == forbidden


def test_the_hyperthreading_trait_itself_is_a_thread_policy_for_pinned_cpus():
    result = spec({"hw:cpu_policy": "dedicated", "trait:HW_CPU_HYPERTHREADING": "forbidden"})
    assert group(result).forbidden == {"HW_CPU_HYPERTHREADING"}


def test_numa_nodes_split_evenly():
    result = spec({"hw:numa_nodes": "2"})
    assert result.host_request.numa == NumaRequest(2)
    assert result.host_request.numa.guest_cells(4, 4096) == [(2, 2048), (2, 2048)]
    assert group(result).resources["VCPU"] == 4  # Placement sees no cells


def test_numa_cells_by_hand():
    result = spec(
        {
            "hw:numa_nodes": "2",
            "hw:numa_cpus.0": "0",
            "hw:numa_cpus.1": "1-3",
            "hw:numa_mem.0": "1024",
            "hw:numa_mem.1": "3072",
        }
    )
    assert result.host_request.numa == NumaRequest(2, (1, 3), (1024, 3072))


def test_numa_nodes_from_the_image_when_the_flavor_sets_none():
    result = spec(
        {},
        {
            "hw_numa_nodes": "2",
            "hw_numa_cpus.0": "0-2",
            "hw_numa_cpus.1": "3",
            "hw_numa_mem.0": "3072",
            "hw_numa_mem.1": "1024",
        },
    )
    assert result.host_request.numa == NumaRequest(2, (3, 1), (3072, 1024))


@pytest.mark.parametrize(
    ("extra_specs", "image", "expected"),
    [
        ({"hw:mem_page_size": "large"}, {}, "large"),
        ({"hw:mem_page_size": "2048"}, {}, 2048),
        ({"hw:mem_page_size": "1GB"}, {}, 1024 * 1024),
        ({"hw:mem_page_size": "2MiB"}, {}, 2048),
        ({"hw:mem_page_size": "any"}, {"hw_mem_page_size": "small"}, "small"),
        ({"hw:mem_page_size": "large"}, {"hw_mem_page_size": "2MB"}, 2048),
    ],
)
def test_page_size_is_recorded_and_wants_a_numa_cell(extra_specs, image, expected):
    result = spec(extra_specs, image)
    assert result.mem_page_size == expected
    assert result.host_request.numa == NumaRequest(1)
    # neither Placement nor the host request carries it
    assert result.candidates_query() == spec().candidates_query()


def test_pci_aliases_become_host_requests_and_one_group_per_device():
    result = spec({"pci_passthrough:alias": "qat:2, nic:1", "group_policy": "none"})
    assert result.host_request.pci == (
        PciRequest(2, "CUSTOM_PCI_8086_0443", "8086", "0443", (), "required"),
        PciRequest(1, "CUSTOM_NIC_X710", None, None, ("CUSTOM_FAST", "HW_NIC_SRIOV"), "preferred"),
    )
    pci_groups = [g for g in result.groups if g.pci_request is not None]
    assert [(g.suffix, dict(g.resources), g.required, g.pci_request) for g in pci_groups] == [
        ("_pci0_0", {"CUSTOM_PCI_8086_0443": 1}, frozenset(), 0),
        ("_pci0_1", {"CUSTOM_PCI_8086_0443": 1}, frozenset(), 0),
        ("_pci1_0", {"CUSTOM_NIC_X710": 1}, {"CUSTOM_FAST", "HW_NIC_SRIOV"}, 1),
    ]
    assert [(d.alias, d.device_type) for d in result.pci_devices] == [("qat", None), ("nic", "type-PF")]
    # the devices are not counted again among the host request's other resources
    assert result.host_request.resources == {}


def test_pci_groups_alone_default_the_group_policy_to_none():
    assert spec({"pci_passthrough:alias": "qat:2"}).group_policy == "none"
    assert spec({"pci_passthrough:alias": "qat:1", "resources1:CUSTOM_X": "1"}).group_policy == "none"
    assert spec({"pci_passthrough:alias": "qat:1"}).group_policy is None


def test_the_pci_numa_affinity_policy_overrides_the_alias():
    result = spec({"pci_passthrough:alias": "nic:1", "hw:pci_numa_affinity_policy": "required"})
    assert result.host_request.pci[0].numa_policy == "required"
    result = spec({"pci_passthrough:alias": "qat:1"}, {"hw_pci_numa_affinity_policy": "preferred"})
    assert result.host_request.pci[0].numa_policy == "preferred"


def test_without_pci_in_placement_devices_are_left_to_the_agent():
    config = SchedulerConfig(pci_aliases=CONFIG.pci_aliases, pci_in_placement=False)
    result = spec({"pci_passthrough:alias": "qat:2"}, config=config)
    assert [g.suffix for g in result.groups] == [""] and result.group_policy is None
    assert result.host_request.pci[0].count == 2


def test_aggregate_extra_specs_are_kept_for_the_aggregate_filter():
    result = spec({"aggregate_instance_extra_specs:ssd": "true", "aggregate_instance_extra_specs:tier": "<in> gold"})
    assert result.aggregate_extra_specs == {"ssd": "true", "tier": "<in> gold"}


def test_member_of_and_the_zone_aggregates_go_to_the_unsuffixed_group():
    result = spec(availability_zone="az1", member_of=[OTHER_AGGREGATE, {ZONE_AGGREGATE, OTHER_AGGREGATE}])
    assert group(result).member_of == (
        frozenset({OTHER_AGGREGATE}),
        frozenset({ZONE_AGGREGATE, OTHER_AGGREGATE}),
        frozenset({ZONE_AGGREGATE}),
    )
    assert result.availability_zone == "az1"


def test_a_zone_without_known_aggregates_is_only_recorded():
    result = spec(availability_zone="elsewhere")
    assert result.availability_zone == "elsewhere" and group(result).member_of == ()


def test_settings_can_keep_disabled_hosts_and_drop_the_limit():
    result = spec(config=SchedulerConfig(exclude_disabled_hosts=False, max_placement_results=None))
    assert result.root_forbidden == frozenset() and result.limit is None


def test_the_image_metadata_prefilter_requires_root_traits():
    config = SchedulerConfig(image_metadata_prefilter=True)
    result = spec({}, {"hw_architecture": "x86_64", "hw_disk_bus": "virtio", "hw_vif_model": "e1000e"}, config=config)
    assert result.root_required == {"HW_ARCH_X86_64", "COMPUTE_STORAGE_BUS_VIRTIO", "COMPUTE_NET_VIF_MODEL_E1000E"}
    assert spec({}, {"hw_architecture": "x86_64"}).root_required == frozenset()


def test_num_instances_project_and_user_are_kept():
    result = spec(num_instances=3)
    assert result.num_instances == 3
    assert result.host_request.to_dict()["vcpus"] == 4  # one instance's claim
