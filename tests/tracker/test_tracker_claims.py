"""Instance claims against a real ``berth serve``: fitting, failure, abort, persistence, recovery."""

from __future__ import annotations

import threading

import pytest
from trackerhelpers import GPU, SMALL, assert_books_agree, flavor, instance, new_uuid

from berth.clients.errors import ClaimError, ClaimFailed, InvalidRequest
from berth.domain.host.records import ACTIVE
from berth.domain.host.request import NumaRequest, PciRequest


def test_instance_claim_writes_allocations_and_persists_the_claim(hosts, placement):
    host = hosts()
    inst = instance(flavor(2, 2048, 10))
    claim = host.instance_claim(inst)

    assert claim.state == ACTIVE and claim.kind == "instance"
    root = host.tree.root.uuid
    assert placement.consumer(inst.uuid).allocations == {root: {"VCPU": 2, "MEMORY_MB": 2048, "DISK_GB": 10}}
    assert [c.claim_id for c in host.claims_for_instance(inst.uuid)] == [claim.claim_id]
    assert [c.claim_id for c in host.claims_for_host(host.host)] == [claim.claim_id]
    assert host.claims_for_host("some-other-host") == []
    assert host.capacity()["providers"][root]["inventories"]["VCPU"]["free"] == 6
    assert_books_agree(host)


def test_numa_and_pci_claim_spans_the_tree_in_one_consumer(hosts, placement):
    host = hosts()
    inst = instance(
        flavor(
            2,
            1024,
            1,
            numa=NumaRequest(1),
            pci=(
                PciRequest(1, resource_class=GPU),
                PciRequest(2, resource_class="SRIOV_NET_VF", numa_policy="required"),
            ),
        )
    )
    claim = host.instance_claim(inst)

    # The VFs live on cell 1 only, and are required local: the guest lands on cell 1, with its GPU.
    assert [c.host_cell for c in claim.numa] == [1]
    assert {(d.resource_class, d.device) for d in claim.pci} == {
        (GPU, "0000:c1:00.0"),
        ("SRIOV_NET_VF", "0000:c2:00.0"),
    }
    assert len({d.address for d in claim.pci}) == 3
    held = placement.consumer(inst.uuid).allocations
    gpu1 = host.tree.get(f"{host.host}_0000:c1:00.0").uuid
    nic = host.tree.get(f"{host.host}_0000:c2:00.0").uuid
    assert held == {
        host.tree.root.uuid: {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 1},
        gpu1: {GPU: 1},
        nic: {"SRIOV_NET_VF": 2},
    }
    assert_books_agree(host)


def test_pinned_cpus_come_from_the_dedicated_set_and_are_never_shared(hosts):
    host = hosts(cpu_dedicated_set="5-7")
    assert host.tree.root.inventories["PCPU"].total == 3
    first = host.instance_claim(instance(flavor(2, 512, cpu_policy="dedicated")))
    assert first.numa[0].pinned_cpus == (5, 6)
    second = host.instance_claim(instance(flavor(1, 512, cpu_policy="dedicated")))
    assert second.numa[0].pinned_cpus == (7,)
    with pytest.raises(ClaimFailed) as failure:
        host.instance_claim(instance(flavor(1, 512, cpu_policy="dedicated")))
    assert "PCPU" in str(failure.value)
    assert_books_agree(host)


def test_guest_with_two_numa_cells_uses_two_host_cells(hosts):
    host = hosts()
    claim = host.instance_claim(instance(flavor(4, 4096, numa=NumaRequest(2))))
    assert sorted(c.host_cell for c in claim.numa) == [0, 1]
    assert [c.vcpus for c in claim.numa] == [2, 2]
    with pytest.raises(ClaimFailed, match="guest cells"):
        host.instance_claim(instance(flavor(3, 3072, numa=NumaRequest(3))))
    assert_books_agree(host)


FAILURES = [
    (flavor(9, 512), "VCPU"),
    (flavor(1, 20000), "MEMORY_MB"),
    (flavor(1, 512, 500), "DISK_GB"),
    (flavor(1, 512, pci=(PciRequest(3, resource_class=GPU),)), "PCI request 0"),
    (flavor(1, 512, numa=NumaRequest(1), pci=(PciRequest(5, resource_class="SRIOV_NET_VF"),)), "PCI request 0"),
    (flavor(5, 512, numa=NumaRequest(1)), "NUMA cell"),
    (flavor(1, 512, resources={"CUSTOM_NOT_HERE": 1}), "CUSTOM_NOT_HERE"),
]


def test_requests_that_do_not_fit_fail_and_leave_nothing_behind(hosts, placement):
    host = hosts()
    for request_flavor, reason in FAILURES:
        inst = instance(request_flavor)
        with pytest.raises(ClaimFailed, match=reason):
            host.instance_claim(inst)
        assert host.claims_for_instance(inst.uuid) == []
        assert placement.consumer(inst.uuid).allocations == {}
    assert_books_agree(host)


def test_invalid_requests_are_refused(hosts):
    host = hosts(topology=SMALL)
    with pytest.raises(InvalidRequest):
        host.instance_claim(instance(flavor(0, 512)))
    with pytest.raises(InvalidRequest):
        host.instance_claim(instance(flavor(2, 512, numa=NumaRequest(2, cell_vcpus=(1, 2)))))
    with pytest.raises(InvalidRequest):
        host.instance_claim(instance(flavor(1, 512, resources={"VCPU": 1})))


def test_a_second_claim_for_the_same_instance_is_refused(hosts):
    host = hosts(topology=SMALL)
    inst = instance()
    host.instance_claim(inst)
    with pytest.raises(ClaimError, match="already has a claim"):
        host.instance_claim(inst)
    assert len(host.claims_for_instance(inst.uuid)) == 1


def test_claim_fails_when_placement_refuses_capacity_taken_behind_the_trackers_back(hosts, placement):
    host = hosts(topology=SMALL)
    outsider = new_uuid()
    placement.write_consumers(
        {
            outsider: {
                "allocations": {host.tree.root.uuid: {"VCPU": 3}},
                "generation": None,
                "project_id": "p",
                "user_id": "u",
                "consumer_type": "INSTANCE",
            }
        }
    )
    inst = instance(flavor(2, 512))
    with pytest.raises(ClaimFailed, match="Placement"):
        host.instance_claim(inst)  # the tracker's own books said yes; the service has the last word
    assert host.claims_for_instance(inst.uuid) == []
    assert placement.consumer(inst.uuid).allocations == {}
    placement.write_consumers(
        {
            outsider: {
                "allocations": {},
                "generation": placement.consumer(outsider).generation,
                "project_id": "p",
                "user_id": "u",
                "consumer_type": "INSTANCE",
            }
        }
    )
    assert_books_agree(host)


def test_claim_as_context_manager_aborts_when_the_build_fails(hosts, placement):
    host = hosts()
    inst = instance(flavor(2, 1024, pci=(PciRequest(1, resource_class=GPU),)))
    with pytest.raises(RuntimeError), host.instance_claim(inst) as claim:
        assert placement.consumer(inst.uuid).allocations
        raise RuntimeError("spawn failed")
    assert host.claims_for_instance(inst.uuid) == []
    assert placement.consumer(inst.uuid).allocations == {}
    assert all(slot is None for pool in host.capacity()["pci"] for slot in pool["slots"].values())

    with host.instance_claim(inst) as claim:
        pass  # success keeps the claim
    assert host.get_claim(claim.claim_id).state == ACTIVE
    claim.abort()  # explicit abort frees it
    claim.abort()  # and is harmless twice
    assert placement.consumer(inst.uuid).allocations == {}
    assert_books_agree(host)


def test_concurrent_claims_on_one_host_never_overcommit(hosts, placement):
    host = hosts(topology=SMALL)
    outcomes = []

    def claim():
        try:
            outcomes.append(host.instance_claim(instance(flavor(1, 1024, disk_gb=1))))
        except ClaimFailed:
            outcomes.append(None)

    threads = [threading.Thread(target=claim) for _ in range(7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(o is not None for o in outcomes) == 4  # 4 CPUs, ratio 1.0
    assert placement.usages(host.tree.root.uuid)["VCPU"] == 4
    assert_books_agree(host)


def test_a_restarted_tracker_recovers_every_claim_with_its_cells_and_devices(hosts, placement):
    host = hosts(cpu_dedicated_set="6-7")
    numa = host.instance_claim(
        instance(flavor(2, 1024, cpu_policy="dedicated", pci=(PciRequest(1, resource_class="SRIOV_NET_VF"),)))
    )
    plain = host.instance_claim(instance(flavor(1, 512, pci=(PciRequest(1, resource_class=GPU),))))
    before = host.capacity()

    again = hosts.restart(host)
    assert {c.claim_id: c.record for c in again.claims_for_host(again.host)} == {
        numa.claim_id: numa.record,
        plain.claim_id: plain.record,
    }
    assert again.get_claim(numa.claim_id).numa[0].pinned_cpus == (6, 7)
    assert again.get_claim(plain.claim_id).pci[0].address == plain.pci[0].address
    assert again.capacity() == before
    # The recovered books steer new claims away from what is taken.
    third = again.instance_claim(instance(flavor(1, 512, pci=(PciRequest(1, resource_class=GPU),))))
    assert third.pci[0].address != plain.pci[0].address
    with pytest.raises(ClaimFailed):
        again.instance_claim(instance(flavor(1, 512, cpu_policy="dedicated")))
    assert_books_agree(again)


class Crash(BaseException):
    """The process dies here (not an Exception: nothing on the way up may handle it)."""


def _crash_around_writes(tracker, *, after: bool):
    real = tracker.placement.write_consumers

    def write(writes):
        if after:
            real(writes)
        raise Crash()

    tracker.placement.write_consumers = write


@pytest.mark.parametrize("after", [True, False], ids=["after-placement-write", "before-placement-write"])
def test_crash_in_the_middle_of_a_claim_is_settled_on_restart(hosts, placement, after):
    host = hosts(topology=SMALL)
    inst = instance(flavor(2, 1024))
    _crash_around_writes(host, after=after)
    with pytest.raises(Crash):
        host.instance_claim(inst)
    assert host.store.for_instance(inst.uuid)[0].pending_op == "claim"

    again = hosts.restart(host)
    kept = again.claims_for_instance(inst.uuid)
    if after:
        assert [c.pending_op for c in kept] == [None]
        assert placement.consumer(inst.uuid).allocations
    else:
        assert kept == []
        assert placement.consumer(inst.uuid).allocations == {}
    assert_books_agree(again)


def test_crash_in_the_middle_of_a_release_is_finished_on_restart(hosts, placement):
    host = hosts(topology=SMALL)
    inst = instance(flavor(2, 1024))
    claim = host.instance_claim(inst)
    _crash_around_writes(host, after=False)
    with pytest.raises(Crash):
        claim.abort()
    assert placement.consumer(inst.uuid).allocations  # nothing released yet
    again = hosts.restart(host)
    assert again.claims_for_instance(inst.uuid) == []
    assert placement.consumer(inst.uuid).allocations == {}
    assert_books_agree(again)


def test_extra_resources_from_the_provider_config_are_claimed_where_they_live(hosts, placement, tmp_path):
    config = tmp_path / "extra.yaml"
    config.write_text("""
resource_classes:
  CUSTOM_LICENSE_SEAT: {units: seat, description: Seats of the database licence}
providers:
  - identification: {name: $COMPUTE_NODE}
    inventories: {CUSTOM_LICENSE_SEAT: {total: 2, max_unit: 1}}
    traits: [CUSTOM_LICENSED]
""")
    host = hosts(provider_config=str(config))
    inst = instance(flavor(1, 512, resources={"CUSTOM_LICENSE_SEAT": 1}))
    host.instance_claim(inst)
    assert placement.consumer(inst.uuid).allocations[host.tree.root.uuid]["CUSTOM_LICENSE_SEAT"] == 1
    host.instance_claim(instance(flavor(1, 512, resources={"CUSTOM_LICENSE_SEAT": 1})))
    with pytest.raises(ClaimFailed, match="CUSTOM_LICENSE_SEAT"):
        host.instance_claim(instance(flavor(1, 512, resources={"CUSTOM_LICENSE_SEAT": 1})))
    assert host.capacity()["resource_classes"]["CUSTOM_LICENSE_SEAT"]["units"] == "seat"
    assert_books_agree(host)


def test_a_claim_written_by_the_scheduler_otherwise_than_planned_is_written_as_planned(hosts, placement):
    """``held`` (what the scheduler wrote) spares the host a read only when it is the host's own
    plan: any other allocation set is replaced by the plan, as without it."""
    host = hosts()
    root = host.tree.root.uuid
    inst = instance(flavor(2, 2048, 10))
    written = {root: {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 10}}  # not what the host plans
    placement.write_consumers(
        {
            inst.uuid: {
                "allocations": written,
                "generation": None,
                "project_id": inst.project_id,
                "user_id": inst.user_id,
                "consumer_type": "INSTANCE",
            }
        }
    )
    host.instance_claim(inst, held=written)
    assert placement.consumer(inst.uuid).allocations == {root: {"VCPU": 2, "MEMORY_MB": 2048, "DISK_GB": 10}}
    assert_books_agree(host)


def test_a_claim_written_by_the_scheduler_as_planned_is_recorded_as_it_stands(hosts, placement):
    host = hosts()
    root = host.tree.root.uuid
    inst = instance(flavor(2, 2048, 10))
    planned = {root: {"VCPU": 2, "MEMORY_MB": 2048, "DISK_GB": 10}}
    placement.write_consumers(
        {
            inst.uuid: {
                "allocations": planned,
                "generation": None,
                "project_id": inst.project_id,
                "user_id": inst.user_id,
                "consumer_type": "INSTANCE",
            }
        }
    )
    from httphelpers import RecordingHttp

    recorded = host.placement.http = RecordingHttp(host.placement.url, host.placement.headers)
    claim = host.instance_claim(inst, held=planned)
    assert recorded.sent == []  # neither read nor written: the books hold it already
    assert claim.state == ACTIVE and host.store.get(claim.claim_id).pending_op is None
    assert placement.consumer(inst.uuid).allocations == planned
    assert_books_agree(host)
