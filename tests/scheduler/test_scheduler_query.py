"""RequestSpec.candidates_query: the parameters of GET /allocation_candidates at 1.39."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

from schedulerhelpers import OTHER_AGGREGATE, ZONE_AGGREGATE, spec

from berth.domain.host.request import Flavor as HostFlavor
from berth.scheduler.request.flavor import Flavor, Image
from berth.scheduler.request.request_spec import QUERY_MICROVERSION, RequestGroup, RequestSpec

TREE = "c7f2b1e4-3a5d-4e6f-8a9b-0c1d2e3f4a5b"


def test_a_plain_flavor():
    assert spec().candidates_query() == [
        ("resources", "DISK_GB:10,MEMORY_MB:4096,VCPU:4"),
        ("root_required", "!COMPUTE_STATUS_DISABLED"),
        ("limit", "1000"),
    ]


def test_every_kind_of_parameter_in_the_order_sent():
    result = spec(
        {
            "trait:HW_CPU_X86_AVX2": "required",
            "trait:CUSTOM_OLD": "forbidden",
            "resources1:CUSTOM_FPGA": "1",
            "trait1:CUSTOM_FPGA_INTEL": "required",
            "pci_passthrough:alias": "nic:1",
            "group_policy": "isolate",
        },
        availability_zone="az1",
        member_of=[OTHER_AGGREGATE],
    )
    assert result.candidates_query() == [
        ("resources", "DISK_GB:10,MEMORY_MB:4096,VCPU:4"),
        ("required", "HW_CPU_X86_AVX2,!CUSTOM_OLD"),
        ("member_of", f"in:{OTHER_AGGREGATE}"),
        ("member_of", f"in:{ZONE_AGGREGATE}"),
        ("resources1", "CUSTOM_FPGA:1"),
        ("required1", "CUSTOM_FPGA_INTEL"),
        ("resources_pci0_0", "CUSTOM_NIC_X710:1"),
        ("required_pci0_0", "CUSTOM_FAST,HW_NIC_SRIOV"),
        ("group_policy", "isolate"),
        ("root_required", "!COMPUTE_STATUS_DISABLED"),
        ("limit", "1000"),
    ]


def test_any_of_sets_forbidden_aggregates_trees_and_request_options_are_separate_keys():
    unsuffixed = RequestGroup(
        resources={"VCPU": 1},
        required=frozenset({"CUSTOM_A"}),
        any_of=(frozenset({"CUSTOM_C", "CUSTOM_B"}), frozenset({"CUSTOM_D", "CUSTOM_E"})),
        member_of=(frozenset({ZONE_AGGREGATE, OTHER_AGGREGATE}),),
        forbidden_aggregates=frozenset({OTHER_AGGREGATE}),
        in_tree=TREE,
    )
    resourceless = RequestGroup(suffix="_x", required=frozenset({"HW_NUMA_ROOT"}))
    request = RequestSpec(
        flavor=Flavor("f", 1, 512),
        image=Image(),
        groups=(unsuffixed, resourceless),
        host_request=HostFlavor("f", 1, 512),
        project_id="p",
        user_id="u",
        same_subtree=(("_x", "_y"),),
        root_required=frozenset({"COMPUTE_NODE"}),
        root_forbidden=frozenset({"COMPUTE_STATUS_DISABLED"}),
    )
    query = request.candidates_query()
    assert query == [
        ("resources", "VCPU:1"),
        ("required", "CUSTOM_A"),
        ("required", "in:CUSTOM_B,CUSTOM_C"),
        ("required", "in:CUSTOM_D,CUSTOM_E"),
        ("member_of", f"in:{OTHER_AGGREGATE},{ZONE_AGGREGATE}"),
        ("member_of", f"!in:{OTHER_AGGREGATE}"),
        ("in_tree", TREE),
        ("required_x", "HW_NUMA_ROOT"),
        ("root_required", "COMPUTE_NODE,!COMPUTE_STATUS_DISABLED"),
        ("same_subtree", "_x,_y"),
    ]
    # the keys repeat in the query string itself, as a client sends them
    assert [key for key, _ in parse_qsl(urlencode(query))].count("required") == 3


def test_the_microversion_is_the_one_with_any_of_traits():
    assert QUERY_MICROVERSION == "1.39"


def test_page_sizes_and_numa_topologies_add_nothing_to_the_query():
    plain = spec().candidates_query()
    assert spec({"hw:numa_nodes": "2", "hw:mem_page_size": "large"}).candidates_query() == plain
