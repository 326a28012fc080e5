"""The periodic audit: claims, Placement and the hypervisor compared, and healed when asked."""

from __future__ import annotations

import threading
import time

from trackerhelpers import SMALL, assert_books_agree, flavor, instance, new_uuid

from berth.tracker.auditing.audit import (
    ALLOCATION_MISMATCH,
    ALLOCATIONS_WITHOUT_CLAIM,
    CLAIM_WITHOUT_ALLOCATIONS,
    CLAIM_WITHOUT_INSTANCE,
    INSTANCE_WITHOUT_CLAIM,
    USAGE_MISMATCH,
)
from berth.tracker.moving import moves


def _kinds(report):
    return sorted(f.kind for f in report.findings)


def _write(placement, consumer, allocations, *, consumer_type="INSTANCE"):
    state = placement.consumer(consumer)
    placement.write_consumers(
        {
            consumer: {
                "allocations": allocations,
                "generation": state.generation,
                "project_id": "project-1",
                "user_id": "user-1",
                "consumer_type": consumer_type,
            }
        }
    )


def test_a_healthy_host_has_nothing_to_report(hosts):
    host = hosts(topology=SMALL)
    inst = instance(flavor(2, 1024))
    host.instance_claim(inst)
    host.driver.spawn(inst.uuid)
    report = host.audit(heal=False)
    assert report.findings == [] and report.consistent
    assert report.usage == {host.tree.root.uuid: {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 1}}


def test_guest_without_a_claim_is_reported_and_adopted_from_placement(hosts, placement):
    host = hosts(topology=SMALL)
    root = host.tree.root.uuid
    known, unknown = new_uuid(), new_uuid()
    _write(placement, known, {root: {"VCPU": 1, "MEMORY_MB": 256}})  # claimed by a lost tracker
    host.driver.spawn(known)
    host.driver.spawn(unknown)  # Placement knows nothing of it
    report = host.audit(heal=False)
    assert INSTANCE_WITHOUT_CLAIM in _kinds(report) and ALLOCATIONS_WITHOUT_CLAIM in _kinds(report)
    assert host.claims_for_instance(known) == []

    report = host.audit(heal=True)
    healed = {f.instance_uuid: f.healed for f in report.of_kind(INSTANCE_WITHOUT_CLAIM)}
    assert healed == {known: "adopted", unknown: None}  # nothing is invented for the unknown one
    [adopted] = host.claims_for_instance(known)
    assert adopted.kind == "adopted" and adopted.allocations == {root: {"VCPU": 1, "MEMORY_MB": 256}}
    assert [f.kind for f in report.residual] == [INSTANCE_WITHOUT_CLAIM]
    host.driver.destroy(unknown)
    assert_books_agree(host)


def test_claim_without_a_guest_is_released_after_the_grace_period(hosts, placement):
    host = hosts(topology=SMALL, audit={"orphan_grace_seconds": 3600})
    inst = instance(flavor(1, 512))
    host.instance_claim(inst)  # never spawned
    assert host.audit(heal=True).findings == []  # within the grace period: building
    host.store.update(host.store.for_instance(inst.uuid)[0], state_changed_at=time.time() - 7200)
    report = host.audit(heal=True)
    assert [(f.kind, f.healed) for f in report.findings] == [(CLAIM_WITHOUT_INSTANCE, "released")]
    assert placement.consumer(inst.uuid).allocations == {}
    assert_books_agree(host)


def test_moves_in_flight_are_not_orphans(hosts):
    src = hosts(topology=SMALL, audit={"orphan_grace_seconds": 0})
    dst = hosts(topology=SMALL, audit={"orphan_grace_seconds": 0})
    inst = instance(flavor(1, 512))
    src.instance_claim(inst)
    src.driver.spawn(inst.uuid)
    moves.start_move(src, dst, inst, new_uuid(), new_flavor=flavor(2, 512))
    src.driver.destroy(inst.uuid)  # neither side runs a guest right now
    assert src.audit(heal=True).findings == []
    assert dst.audit(heal=True).findings == []
    assert_books_agree(src, dst)


def test_allocations_without_a_claim_are_removed_from_this_host_only(hosts, placement):
    host, elsewhere = hosts(topology=SMALL), hosts(topology=SMALL)
    stranger = new_uuid()
    _write(placement, stranger, {host.tree.root.uuid: {"VCPU": 2}, elsewhere.tree.root.uuid: {"VCPU": 1}})
    report = host.audit(heal=False)
    assert _kinds(report) == [ALLOCATIONS_WITHOUT_CLAIM, USAGE_MISMATCH] and not report.consistent
    report = host.audit(heal=True)
    assert report.consistent
    assert placement.consumer(stranger).allocations == {elsewhere.tree.root.uuid: {"VCPU": 1}}
    _write(placement, stranger, {})
    assert_books_agree(host, elsewhere)


def test_lost_or_changed_allocations_are_written_back(hosts, placement):
    host = hosts(topology=SMALL)
    lost, changed = instance(flavor(2, 1024)), instance(flavor(1, 512))
    host.instance_claim(lost)
    host.instance_claim(changed)
    for inst in (lost, changed):
        host.driver.spawn(inst.uuid)
    _write(placement, lost.uuid, {})
    _write(placement, changed.uuid, {host.tree.root.uuid: {"VCPU": 3, "MEMORY_MB": 512, "DISK_GB": 1}})
    report = host.audit(heal=False)
    assert _kinds(report) == [ALLOCATION_MISMATCH, CLAIM_WITHOUT_ALLOCATIONS, USAGE_MISMATCH]
    report = host.audit(heal=True)
    assert report.consistent
    assert placement.consumer(lost.uuid).allocations == {
        host.tree.root.uuid: {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 1}
    }
    assert placement.consumer(changed.uuid).allocations[host.tree.root.uuid]["VCPU"] == 1
    assert_books_agree(host)


def test_the_audit_waits_for_a_claim_in_progress_instead_of_racing_it(hosts):
    host = hosts(topology=SMALL)
    real = host.placement.write_consumers
    writing = threading.Event()

    def slow_write(writes):
        writing.set()
        time.sleep(0.5)
        real(writes)

    host.placement.write_consumers = slow_write
    inst = instance(flavor(2, 1024))
    claimer = threading.Thread(target=host.instance_claim, args=(inst,))
    claimer.start()
    writing.wait(5)
    report = host.audit(heal=True)  # blocks on the host's lock until the claim is done
    claimer.join()
    host.placement.write_consumers = real
    assert report.consistent and report.findings == []
    assert report.usage[host.tree.root.uuid]["VCPU"] == 2
    assert len(host.claims_for_instance(inst.uuid)) == 1


def test_periodic_task_reports_audits_and_reclaims(hosts, placement):
    host = hosts(topology=SMALL, audit={"reclaim_instance_interval": 60})
    inst = instance(flavor(1, 512))
    host.instance_claim(inst)
    host.driver.spawn(inst.uuid)
    host.soft_delete_instance(inst.uuid)
    host.store.update(host.store.for_instance(inst.uuid)[0], state_changed_at=0.0)
    result = host.periodic()
    assert result["reclaimed"] == [inst.uuid]
    assert result["audit"]["consistent"] and not result["sync"]["created"]
    host.driver.destroy(inst.uuid)
    assert_books_agree(host)
