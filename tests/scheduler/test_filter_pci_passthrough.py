"""PciPassthroughFilter: the agent's fitting of the whole request, devices and their NUMA policy
included, on its snapshot."""

from __future__ import annotations

from hosthelpers import FixedSnapshots, make_filter, make_host, request, snapshot
from schedulerhelpers import flavor, spec

from berth.domain.host.fitting import Plan
from berth.scheduler.filters.pci_passthrough import PciPassthroughFilter
from berth.scheduler.request.flavor import SchedulerConfig, parse_pci_aliases

# TOPOLOGY: a GPU (10de:1eb8) on each cell, a NIC of 4 virtual functions on cell 1.
CONFIG = SchedulerConfig(
    pci_aliases=parse_pci_aliases(
        [
            '{"name": "gpu", "vendor_id": "10de", "product_id": "1eb8"}',
            '{"name": "vf", "resource_class": "SRIOV_NET_VF", "numa_policy": "required"}',
        ]
    )
)


def _request(extra_specs, **flavor_fields):
    return request(spec(flavor_=flavor(extra_specs, **flavor_fields), config=CONFIG))


def _host():
    return make_host("numa", FixedSnapshots({"numa": snapshot("numa")}))


def test_free_devices_pass_and_missing_ones_are_named():
    check = make_filter(PciPassthroughFilter, CONFIG)
    host = _host()
    two = _request({"pci_passthrough:alias": "gpu:2"}, vcpus=1)
    assert check.applies(two)
    assert check.host_passes(host, two)
    three = _request({"pci_passthrough:alias": "gpu:3"}, vcpus=1)
    assert check.refusal(host, three) == (
        "PCI request 0 (3 x [resource_class=CUSTOM_PCI_10DE_1EB8 vendor_id=10de product_id=1eb8]): 2 of 3 devices free"
    )


def test_a_required_numa_policy_keeps_the_guest_on_the_devices_cell():
    check = make_filter(PciPassthroughFilter, CONFIG)
    host = _host()
    # Cell 1 holds the virtual functions; a guest of one cell with 8 GB fits on either cell.
    assert check.host_passes(host, _request({"hw:numa_nodes": "1", "pci_passthrough:alias": "vf:2"}, vcpus=2))
    plan = host.fit(_request({"hw:numa_nodes": "1", "pci_passthrough:alias": "vf:2"}, vcpus=2).spec.host_request)
    assert isinstance(plan, Plan)
    assert [cell.host_cell for cell in plan.numa] == [1]
    # Fill cell 1's CPUs: the guest could still go to cell 0, but not with its devices.
    host.consume(host.requests[0], "other", plan, member=False)
    busy = _request({"hw:numa_nodes": "1", "pci_passthrough:alias": "vf:1"}, vcpus=3)
    assert not check.host_passes(host, busy)
    assert "on the guest's NUMA cells" in check.refusal(host, busy)


def test_a_host_whose_agent_does_not_answer_is_refused():
    check = make_filter(PciPassthroughFilter, CONFIG)
    host = make_host("numa", FixedSnapshots({"numa": "its agent did not give a snapshot: timed out"}))
    assert check.refusal(host, _request({"pci_passthrough:alias": "gpu:1"})) == (
        "its agent did not give a snapshot: timed out"
    )


def test_a_flavor_without_devices_is_not_filtered():
    assert not make_filter(PciPassthroughFilter, CONFIG).applies(_request({"hw:numa_nodes": "1"}))
