"""The candidates query of real request specs, sent to the real API in process: accepted, and
answered with the providers the spec is meant to find."""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlencode

import pytest
from schedulerhelpers import CONFIG, ZONE_AGGREGATE, flavor, group, spec

from berth.scheduler.request.request_spec import QUERY_MICROVERSION, RequestSpec

HOST = {"VCPU": 16, "MEMORY_MB": 32768, "DISK_GB": 500}


@pytest.fixture
def cloud(api):
    """Four compute nodes: a plain one in the zone, a disabled one in the zone, one with pinned CPUs
    and AVX2, and one with two QAT devices and a NIC below its NUMA cell."""
    hosts = {
        "plain": api.create_provider("plain", inventory=HOST, traits=["COMPUTE_NODE"], aggregates=[ZONE_AGGREGATE]),
        "disabled": api.create_provider(
            "disabled", inventory=HOST, traits=["COMPUTE_NODE", "COMPUTE_STATUS_DISABLED"], aggregates=[ZONE_AGGREGATE]
        ),
        "pinned": api.create_provider(
            "pinned",
            inventory={"PCPU": 8, "MEMORY_MB": 32768, "DISK_GB": 500},
            traits=["COMPUTE_NODE", "HW_CPU_X86_AVX2"],
        ),
        "pci": api.create_provider("pci", inventory=HOST, traits=["COMPUTE_NODE"]),
    }
    for rc in ("CUSTOM_PCI_8086_0443", "CUSTOM_NIC_X710"):
        assert api.put(f"/resource_classes/{rc}").status_code in (201, 204)
    cell = api.create_provider("pci_NUMA0", parent=hosts["pci"], traits=["HW_NUMA_ROOT"])
    devices = {
        name: api.create_provider(
            f"pci_{name}", parent=cell, inventory={rc: {"total": 1, "max_unit": 1}}, traits=traits
        )
        for name, rc, traits in (
            ("qat0", "CUSTOM_PCI_8086_0443", ["COMPUTE_MANAGED_PCI_DEVICE"]),
            ("qat1", "CUSTOM_PCI_8086_0443", ["COMPUTE_MANAGED_PCI_DEVICE"]),
            ("nic", "CUSTOM_NIC_X710", ["COMPUTE_MANAGED_PCI_DEVICE", "CUSTOM_FAST", "HW_NIC_SRIOV"]),
        )
    }
    return hosts, devices


def _candidates(api, request: RequestSpec):
    response = api.get("/allocation_candidates?" + urlencode(request.candidates_query()), version=QUERY_MICROVERSION)
    assert response.status_code == 200, response.data
    return response.json_body["allocation_requests"]


def _roots(api, answers) -> set[str]:
    names = set()
    for answer in answers:
        for provider in answer["allocations"]:
            body = api.get(f"/resource_providers/{provider}").json_body
            if body["parent_provider_uuid"] is None:
                names.add(body["name"])
    return names


def test_a_plain_flavor_in_a_zone_finds_the_enabled_host_of_the_zone(api, cloud):
    answers = _candidates(api, spec(availability_zone="az1"))
    assert _roots(api, answers) == {"plain"}


def test_a_plain_flavor_finds_every_enabled_host_with_room(api, cloud):
    assert _roots(api, _candidates(api, spec())) == {"plain", "pci"}


def test_pinned_cpus_and_an_image_trait_find_the_pinned_host(api, cloud):
    hosts, _ = cloud
    answers = _candidates(api, spec({"hw:cpu_policy": "dedicated"}, {"trait:HW_CPU_X86_AVX2": "required"}))
    assert [answer["allocations"] for answer in answers] == [
        {hosts["pinned"]: {"resources": {"PCPU": 4, "MEMORY_MB": 4096, "DISK_GB": 10}}}
    ]


def test_each_pci_device_comes_from_its_own_provider(api, cloud):
    hosts, devices = cloud
    # CUSTOM_NONE exists nowhere: asked for 0, it is left out of the query, or Placement would refuse it
    request = spec({"pci_passthrough:alias": "qat:2,nic:1", "resources:CUSTOM_NONE": "0"}, config=CONFIG)
    answers = _candidates(api, request)
    assert answers, "the PCI host has both QAT devices and the NIC"
    for answer in answers:
        mappings = answer["mappings"]
        assert {mappings["_pci0_0"][0], mappings["_pci0_1"][0]} == {devices["qat0"], devices["qat1"]}
        assert mappings["_pci1_0"] == [devices["nic"]]
        assert mappings[""] == [hosts["pci"]]


def test_three_qat_devices_find_nothing(api, cloud):
    assert _candidates(api, spec({"pci_passthrough:alias": "qat:3"})) == []


def test_a_granular_group_with_a_forbidden_trait_and_isolation(api, cloud):
    hosts, devices = cloud
    extra_specs = {
        "resources1:CUSTOM_NIC_X710": "1",
        "trait1:CUSTOM_FAST": "required",
        "trait1:HW_NIC_OFFLOAD_TSO": "forbidden",
        "pci_passthrough:alias": "qat:1",
        "group_policy": "isolate",
    }
    request = spec(flavor_=flavor(extra_specs, root_gb=0))
    answers = _candidates(api, request)
    found = sorted((a["mappings"][""][0], a["mappings"]["1"][0], a["mappings"]["_pci0_0"][0]) for a in answers)
    assert found == sorted((hosts["pci"], devices["nic"], devices[qat]) for qat in ("qat0", "qat1"))


def test_a_forbidden_trait_of_the_granular_group_excludes_the_device(api, cloud):
    request = spec({"resources1:CUSTOM_NIC_X710": "1", "trait1:CUSTOM_FAST": "forbidden"})
    assert _candidates(api, request) == []


def test_any_of_traits_forbidden_aggregates_and_in_tree_are_accepted(api, cloud):
    hosts, _ = cloud
    base = spec()
    unsuffixed = replace(
        group(base),
        any_of=(frozenset({"COMPUTE_NODE", "HW_CPU_X86_AVX2"}),),
        forbidden_aggregates=frozenset({ZONE_AGGREGATE}),
    )
    request = replace(base, groups=(unsuffixed,))
    assert _roots(api, _candidates(api, request)) == {"pci"}
    in_tree = replace(base, groups=(replace(group(base), in_tree=hosts["plain"]),))
    assert _roots(api, _candidates(api, in_tree)) == {"plain"}
