"""A bad flavor, extra spec, image property or argument is one SpecError naming the key, raised
before any query is sent."""

from __future__ import annotations

import pytest
from schedulerhelpers import flavor, spec

from berth.scheduler.errors import SpecError

BAD_SPECS = [
    # resource classes and amounts
    ({"resources:VPCU": "2"}, {}, "resources:VPCU", "neither a standard resource class"),
    ({"resources1:custom_x": "1"}, {}, "resources1:custom_x", "neither a standard resource class"),
    ({"resources:VCPU": "two"}, {}, "resources:VCPU", "not a whole number"),
    ({"resources:VCPU": "1.5"}, {}, "resources:VCPU", "not a whole number"),
    ({"resources:CUSTOM_X": "-1"}, {}, "resources:CUSTOM_X", "negative"),
    ({"resources!:CUSTOM_X": "1"}, {}, "resources!:CUSTOM_X", "group suffix"),
    ({"resources:VCPU": "0"}, {}, "resources:VCPU", "at least one vCPU"),
    ({"resources:MEMORY_MB": "0"}, {}, "resources:MEMORY_MB", "at least one MB"),
    # traits
    ({"trait:HW_CPU_X86_AVX3": "required"}, {}, "trait:HW_CPU_X86_AVX3", "neither a standard trait"),
    ({"trait:CUSTOM_A": "yes"}, {}, "trait:CUSTOM_A", "neither 'required' nor 'forbidden'"),
    ({"trait:CUSTOM_A": "forbidden"}, {"trait:CUSTOM_A": "required"}, "trait:CUSTOM_A", "both required and forbidden"),
    ({}, {"trait:CUSTOM_A": "forbidden"}, "trait:CUSTOM_A", "can only require"),
    ({"trait1:CUSTOM_A": "required"}, {}, "trait1:CUSTOM_A", "traits but no resources"),
    # priority and preemption
    ({"berth:priority": "high"}, {}, "berth:priority", "not a whole number"),
    ({"berth:priority": "1.5"}, {}, "berth:priority", "not a whole number"),
    ({"berth:priority": "1001"}, {}, "berth:priority", "not between -1000 and 1000"),
    ({"berth:preemption_action": "stop"}, {}, "berth:preemption_action", "not one of delete, shelve_offload"),
    # group policy
    ({"group_policy": "isolated"}, {}, "group_policy", "neither 'none' nor 'isolate'"),
    ({"resources1:CUSTOM_X": "1", "resources2:CUSTOM_Y": "1"}, {}, "group_policy", "the flavor has 2 request groups"),
    # CPU policies
    ({"hw:cpu_policy": "pinned"}, {}, "hw:cpu_policy", "not one of"),
    ({"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "0"}, {}, "hw:cpu_policy", "not supported"),
    ({"hw:cpu_policy": "shared"}, {"hw_cpu_policy": "dedicated"}, "hw_cpu_policy", "the flavor says 'shared'"),
    ({"hw:cpu_policy": "dedicated", "resources:PCPU": "4"}, {}, "resources:PCPU", "cannot be combined"),
    ({"resources:PCPU": "2"}, {}, "resources:PCPU", "exactly the flavor's 4"),
    ({"resources:PCPU": "4", "resources:VCPU": "1"}, {}, "resources:PCPU", "cannot both"),
    ({"hw:cpu_thread_policy": "require"}, {}, "hw:cpu_thread_policy", "needs pinned CPUs"),
    ({"trait:HW_CPU_HYPERTHREADING": "required"}, {}, "trait:HW_CPU_HYPERTHREADING", "needs pinned CPUs"),
    (
        {"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "isolate", "trait:HW_CPU_HYPERTHREADING": "forbidden"},
        {},
        "trait:HW_CPU_HYPERTHREADING",
        "cannot be combined with hw:cpu_thread_policy",
    ),
    (
        {"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "isolate"},
        {"hw_cpu_thread_policy": "require"},
        "hw_cpu_thread_policy",
        "the image asks for 'require'",
    ),
    (
        {"hw:cpu_policy": "dedicated", "hw:emulator_threads_policy": "isolate"},
        {},
        "hw:emulator_threads_policy",
        "not supported",
    ),
    ({"hw:emulator_threads_policy": "own"}, {}, "hw:emulator_threads_policy", "not one of"),
    # NUMA
    ({"hw:numa_nodes": "0"}, {}, "hw:numa_nodes", "not a number of NUMA nodes"),
    ({"hw:numa_nodes": "3"}, {}, "hw:numa_nodes", "do not divide evenly into 3 cells"),
    ({"hw:numa_nodes": "2"}, {"hw_numa_nodes": "2"}, "hw_numa_nodes", "may not change it"),
    ({"hw:numa_cpus.0": "0-3", "hw:numa_mem.0": "4096"}, {}, "hw:numa_cpus.0", "needs hw:numa_nodes"),
    (
        {"hw:numa_nodes": "2", "hw:numa_cpus.0": "0-1", "hw:numa_cpus.1": "2-3"},
        {},
        "hw:numa_mem",
        "hw:numa_mem.0 is missing",
    ),
    (
        {
            "hw:numa_nodes": "2",
            "hw:numa_cpus.0": "0-1",
            "hw:numa_cpus.2": "2-3",
            "hw:numa_mem.0": "2048",
            "hw:numa_mem.1": "2048",
        },
        {},
        "hw:numa_cpus",
        "hw:numa_cpus.1 is missing",
    ),
    (
        {
            "hw:numa_nodes": "2",
            "hw:numa_cpus.0": "0-1",
            "hw:numa_cpus.1": "2",
            "hw:numa_mem.0": "2048",
            "hw:numa_mem.1": "2048",
        },
        {},
        "hw:numa_cpus",
        "vCPUs 3 are in no cell",
    ),
    (
        {
            "hw:numa_nodes": "2",
            "hw:numa_cpus.0": "0-2",
            "hw:numa_cpus.1": "2-3",
            "hw:numa_mem.0": "2048",
            "hw:numa_mem.1": "2048",
        },
        {},
        "hw:numa_cpus.1",
        "CPU 2 is in another cell",
    ),
    (
        {
            "hw:numa_nodes": "2",
            "hw:numa_cpus.0": "0-1",
            "hw:numa_cpus.1": "2-4",
            "hw:numa_mem.0": "2048",
            "hw:numa_mem.1": "2048",
        },
        {},
        "hw:numa_cpus.1",
        "CPU 4 is beyond",
    ),
    (
        {
            "hw:numa_nodes": "2",
            "hw:numa_cpus.0": "0-1",
            "hw:numa_cpus.1": "2-3",
            "hw:numa_mem.0": "1024",
            "hw:numa_mem.1": "2048",
        },
        {},
        "hw:numa_mem",
        "add up to 3072 MB, the flavor has 4096 MB",
    ),
    (
        {"hw:numa_nodes": "1", "hw:numa_cpus.0": "0-x", "hw:numa_mem.0": "4096"},
        {},
        "hw:numa_cpus.0",
        "not a CPU number or range",
    ),
    ({"hw:numa_nodes": "1", "hw:numa_cpus.first": "0-3"}, {}, "hw:numa_cpus.first", "cell number"),
    ({"hw:numa_nodes": "2", "resources:VCPU": "2"}, {}, "resources:VCPU", "which a NUMA topology divides"),
    (
        {
            "hw:numa_nodes": "2",
            "hw:numa_cpus.0": "0-1",
            "hw:numa_cpus.1": "2-3",
            "hw:numa_mem.0": "2048",
            "hw:numa_mem.1": "2048",
        },
        {"hw_numa_cpus.0": "0-3"},
        "hw_numa_cpus",
        "may not change them",
    ),
    # page size
    ({"hw:mem_page_size": "huge"}, {}, "hw:mem_page_size", "not small, large, any or a size"),
    ({"hw:mem_page_size": "2Mb"}, {}, "hw:mem_page_size", "not small, large, any or a size"),
    ({}, {"hw_mem_page_size": "large"}, "hw_mem_page_size", "the flavor sets no hw:mem_page_size"),
    ({"hw:mem_page_size": "small"}, {"hw_mem_page_size": "large"}, "hw_mem_page_size", "cannot change it"),
    # PCI
    ({"pci_passthrough:alias": "gpu:1"}, {}, "pci_passthrough:alias", "no PCI alias 'gpu' is configured"),
    ({"pci_passthrough:alias": "qat"}, {}, "pci_passthrough:alias", "not <alias>:<count>"),
    ({"pci_passthrough:alias": "qat:0"}, {}, "pci_passthrough:alias", "not a number of devices"),
    (
        {"pci_passthrough:alias": "qat:1", "hw:pci_numa_affinity_policy": "socket"},
        {},
        "hw:pci_numa_affinity_policy",
        "not supported",
    ),
    (
        {"pci_passthrough:alias": "qat:1", "hw:pci_numa_affinity_policy": "local"},
        {},
        "hw:pci_numa_affinity_policy",
        "not one of",
    ),
    (
        {"pci_passthrough:alias": "qat:1", "hw:pci_numa_affinity_policy": "required"},
        {"hw_pci_numa_affinity_policy": "preferred"},
        "hw_pci_numa_affinity_policy",
        "the image asks for",
    ),
    (
        {"pci_passthrough:alias": "qat:1", "resources_pci0_0:CUSTOM_X": "1"},
        {},
        "resources_pci0_0:CUSTOM_X",
        "PCI device's request group",
    ),
    # aggregates
    ({"aggregate_instance_extra_specs:": "x"}, {}, "aggregate_instance_extra_specs:", "names no aggregate"),
]


@pytest.mark.parametrize(("extra_specs", "image", "key", "problem"), BAD_SPECS)
def test_a_bad_spec_names_its_key_and_what_is_wrong(extra_specs, image, key, problem):
    with pytest.raises(SpecError) as caught:
        spec(extra_specs, image)
    assert caught.value.key == key
    assert problem in caught.value.problem
    assert str(caught.value).startswith(f"{key}: ")


def test_a_trait_may_be_required_in_one_group_and_forbidden_in_another():
    result = spec({"trait1:CUSTOM_B": "forbidden", "resources1:CUSTOM_X": "1"}, {"trait:CUSTOM_B": "required"})
    assert [(g.suffix, g.required, g.forbidden) for g in result.groups] == [
        ("", {"CUSTOM_B"}, frozenset()),
        ("1", frozenset(), {"CUSTOM_B"}),
    ]


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"num_instances": 0}, "num_instances"),
        ({"member_of": ["not-a-uuid"]}, "member_of"),
        ({"member_of": [set()]}, "member_of"),
        ({"flavor_": flavor(vcpus=0)}, "vcpus"),
        ({"flavor_": flavor(memory_mb=0)}, "memory_mb"),
        ({"flavor_": flavor(swap_mb=-1)}, "swap_mb"),
    ],
)
def test_bad_arguments(kwargs, key):
    with pytest.raises(SpecError) as caught:
        spec(**kwargs)
    assert caught.value.key == key
