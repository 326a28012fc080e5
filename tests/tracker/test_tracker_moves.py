"""Moves with the migration-consumer pattern, against a real ``berth serve``."""

from __future__ import annotations

import pytest
from trackerhelpers import GPU, SMALL, assert_books_agree, flavor, instance, new_uuid

from berth.clients.errors import ClaimError, ClaimFailed, InvalidRequest
from berth.domain.host.claims import NopClaim
from berth.domain.host.records import ACTIVE, INCOMING, OUTGOING
from berth.domain.host.request import NumaRequest, PciRequest
from berth.tracker.moving import moves


def _consumer(placement, uuid):
    return placement.consumer(uuid)


def test_resize_to_another_host_then_confirm(hosts, placement):
    src, dst = hosts(), hosts()
    inst = instance(flavor(2, 1024, 5, numa=NumaRequest(1), pci=(PciRequest(1, resource_class=GPU),)))
    src.instance_claim(inst)
    old = _consumer(placement, inst.uuid).allocations
    migration = new_uuid()
    bigger = flavor(4, 2048, 10, pci=(PciRequest(2, resource_class="SRIOV_NET_VF"),))

    claim = moves.start_move(src, dst, inst, migration, new_flavor=bigger)

    # One POST moved the source's allocations to the migration and put the new ones on the destination.
    held_by_migration = _consumer(placement, migration)
    assert held_by_migration.consumer_type == "MIGRATION" and held_by_migration.allocations == old
    assert set(_consumer(placement, inst.uuid).allocations) <= dst.our_providers()
    assert claim.state == INCOMING and claim.kind == "resize"
    context = claim.migration_context
    assert context.old_flavor.vcpus == 2 and context.new_flavor.vcpus == 4
    assert context.old_numa[0].host_cell == 0 and context.new_numa == ()
    assert context.old_pci[0].resource_class == GPU
    assert [d.resource_class for d in context.new_pci] == ["SRIOV_NET_VF"] * 2
    assert context.old_allocations == old
    # Both sides are counted while the move is in flight.
    assert [c.state for c in src.claims_for_instance(inst.uuid)] == [OUTGOING]
    assert src.capacity()["providers"][src.tree.root.uuid]["inventories"]["VCPU"]["used"] == 2
    assert dst.capacity()["providers"][dst.tree.root.uuid]["inventories"]["VCPU"]["used"] == 4
    assert_books_agree(src, dst)

    moves.confirm_move(src, dst, migration)
    assert _consumer(placement, migration).allocations == {}
    assert src.claims_for_instance(inst.uuid) == []
    [kept] = dst.claims_for_instance(inst.uuid)
    assert kept.state == ACTIVE and kept.migration_context is None
    assert_books_agree(src, dst)


def test_resize_revert_swaps_back_exactly(hosts, placement):
    src, dst = hosts(), hosts()
    inst = instance(flavor(2, 1024, 5, pci=(PciRequest(1, resource_class=GPU),)))
    original = src.instance_claim(inst)
    old = _consumer(placement, inst.uuid).allocations
    migration = new_uuid()
    moves.start_move(src, dst, inst, migration, new_flavor=flavor(3, 2048, 5))
    assert_books_agree(src, dst)

    assert dst.drop_move_claim(migration) == "reverted"  # the destination lets go first
    assert src.revert_migration(migration) == ["restored"]
    assert _consumer(placement, inst.uuid).allocations == old
    assert _consumer(placement, migration).allocations == {}
    assert dst.claims_for_instance(inst.uuid) == []
    [back] = src.claims_for_instance(inst.uuid)
    assert back.state == ACTIVE and back.consumer_uuid == inst.uuid and back.migration_uuid is None
    assert back.pci == original.pci  # the very same device as before
    assert_books_agree(src, dst)


def test_resize_on_the_same_host_counts_both_flavors_until_confirmed(hosts, placement):
    host = hosts(topology=SMALL)
    inst = instance(flavor(2, 2048))
    host.instance_claim(inst)
    migration = new_uuid()
    with pytest.raises(ClaimFailed):
        # 2 held + 3 asked > 4 CPUs: a same-host resize must fit next to the old flavor.
        moves.start_move(host, host, inst, migration, new_flavor=flavor(3, 2048))
    assert [c.state for c in host.claims_for_instance(inst.uuid)] == [ACTIVE]
    assert_books_agree(host)

    moves.start_move(host, host, inst, migration, new_flavor=flavor(2, 4096))
    assert sorted(c.state for c in host.claims_for_instance(inst.uuid)) == [INCOMING, OUTGOING]
    assert placement.usages(host.tree.root.uuid)["VCPU"] == 4
    assert placement.usages(host.tree.root.uuid)["MEMORY_MB"] == 6144
    assert_books_agree(host)

    moves.confirm_move(host, host, migration)
    assert [(c.state, c.flavor.memory_mb) for c in host.claims_for_instance(inst.uuid)] == [(ACTIVE, 4096)]
    assert placement.usages(host.tree.root.uuid)["MEMORY_MB"] == 4096
    assert_books_agree(host)

    second = new_uuid()
    moves.start_move(host, host, inst, second, new_flavor=flavor(1, 512))
    moves.revert_move(host, host, second)
    assert [(c.state, c.flavor.memory_mb) for c in host.claims_for_instance(inst.uuid)] == [(ACTIVE, 4096)]
    assert_books_agree(host)


def test_failed_destination_claim_hands_the_instance_back_to_the_source(hosts, placement):
    src, dst = hosts(topology=SMALL), hosts(topology=SMALL)
    inst = instance(flavor(2, 1024))
    src.instance_claim(inst)
    old = _consumer(placement, inst.uuid).allocations
    migration = new_uuid()
    with pytest.raises(ClaimFailed):
        moves.start_move(src, dst, inst, migration, new_flavor=flavor(64, 1024))
    assert _consumer(placement, inst.uuid).allocations == old
    assert _consumer(placement, migration).allocations == {}
    assert [c.state for c in src.claims_for_instance(inst.uuid)] == [ACTIVE]
    assert dst.claims_for_instance(inst.uuid) == []
    dst.instance_claim(instance(flavor(3, 512)))  # leaves one CPU on the destination
    with pytest.raises(ClaimFailed, match="VCPU"):
        moves.start_move(src, dst, inst, new_uuid(), kind="live_migration")
    assert [c.state for c in src.claims_for_instance(inst.uuid)] == [ACTIVE]
    assert _consumer(placement, inst.uuid).allocations == old
    assert_books_agree(src, dst)


def test_move_claim_as_context_manager_reverts_when_the_move_fails(hosts, placement):
    src, dst = hosts(topology=SMALL), hosts(topology=SMALL)
    inst = instance(flavor(2, 1024))
    src.instance_claim(inst)
    old = _consumer(placement, inst.uuid).allocations
    migration = new_uuid()
    with pytest.raises(RuntimeError), moves.start_move(src, dst, inst, migration, kind="live_migration"):
        raise RuntimeError("the copy failed")
    assert _consumer(placement, inst.uuid).allocations == old
    assert [c.state for c in src.claims_for_instance(inst.uuid)] == [ACTIVE]
    assert dst.claims_for_instance(inst.uuid) == []
    assert_books_agree(src, dst)


def test_live_migration_picks_new_cells_and_devices_and_drop_move_claim_finishes_it(hosts, placement):
    src = hosts(cpu_dedicated_set="4-7")
    dst = hosts(cpu_dedicated_set="4-7")
    dst.instance_claim(instance(flavor(2, 512, cpu_policy="dedicated")))  # takes CPUs 4 and 5 there
    inst = instance(flavor(2, 1024, cpu_policy="dedicated", pci=(PciRequest(1, resource_class="SRIOV_NET_VF"),)))
    first = src.instance_claim(inst)
    assert first.numa[0].pinned_cpus == (4, 5)
    migration = new_uuid()

    claim = moves.start_move(src, dst, inst, migration, kind="live_migration")
    assert claim.kind == "live_migration"
    assert claim.numa[0].pinned_cpus == (6, 7)
    assert claim.migration_context.old_numa[0].pinned_cpus == (4, 5)
    assert claim.migration_context.old_pci == first.pci
    assert_books_agree(src, dst)

    with pytest.raises(InvalidRequest):
        dst.live_migration_claim(
            inst,
            new_uuid(),
            src.begin_move_out(inst.uuid, migration).__class__(
                **{**src.begin_move_out(inst.uuid, migration).__dict__, "host": dst.host}
            ),
        )

    assert src.drop_move_claim(migration) == "confirmed"  # post-live-migration on the source
    assert dst.confirm_migration(migration) == ["finished"]
    assert src.claims_for_instance(inst.uuid) == []
    assert_books_agree(src, dst)


def test_shared_storage_disk_stays_on_the_sharing_provider(hosts, placement):
    storage, aggregate = new_uuid(), new_uuid()
    placement.create_provider(f"nfs-{storage[:8]}", storage)
    placement.set_inventories(storage, 0, {"DISK_GB": {"total": 1000}})
    generation, _ = placement.get_traits(storage)
    generation = placement.set_traits(storage, generation, {"MISC_SHARES_VIA_AGGREGATE"})
    placement.set_aggregates(storage, generation, {aggregate})
    shared = {"shared_storage": {"provider_uuid": storage, "aggregate_uuid": aggregate}}
    src, dst = hosts(topology=SMALL, **shared), hosts(topology=SMALL, **shared)
    assert "DISK_GB" not in src.tree.root.inventories
    assert placement.get_aggregates(src.tree.root.uuid)[1] == {aggregate}

    inst = instance(flavor(2, 1024, 40))
    src.instance_claim(inst)
    assert _consumer(placement, inst.uuid).allocations[storage] == {"DISK_GB": 40}
    migration = new_uuid()
    moves.start_move(src, dst, inst, migration, new_flavor=flavor(2, 1024, 60))

    assert storage not in _consumer(placement, migration).allocations  # the disk did not move
    assert _consumer(placement, inst.uuid).allocations[storage] == {"DISK_GB": 60}
    assert placement.usages(storage)["DISK_GB"] == 60
    assert_books_agree(src, dst)

    moves.revert_move(src, dst, migration)
    assert _consumer(placement, inst.uuid).allocations[storage] == {"DISK_GB": 40}
    assert_books_agree(src, dst)
    moves.start_move(src, dst, inst, migration, kind="live_migration")
    moves.confirm_move(src, dst, migration)
    assert _consumer(placement, inst.uuid).allocations == {
        dst.tree.root.uuid: {"VCPU": 2, "MEMORY_MB": 1024},
        storage: {"DISK_GB": 40},
    }
    assert_books_agree(src, dst)
    dst.delete_instance(inst.uuid)
    assert placement.usages(storage).get("DISK_GB", 0) == 0


def test_evacuation_claims_on_the_destination_and_the_source_cleans_up_when_it_returns(hosts, placement):
    src, dst = hosts(topology=SMALL), hosts(topology=SMALL)
    inst = instance(flavor(2, 1024, 5))
    src.instance_claim(inst)
    src.driver.spawn(inst.uuid)
    old = _consumer(placement, inst.uuid).allocations
    src.close()  # the source host goes down

    migration = new_uuid()
    claim = dst.rebuild_claim(inst, migration, src.host)  # rebuild elsewhere = evacuate
    assert claim.kind == "evacuate" and claim.state == INCOMING
    assert claim.migration_context.old_allocations == old
    assert _consumer(placement, migration).allocations == old  # still counted on the source
    dst.confirm_migration(migration)
    assert_books_agree(dst)

    back = hosts.restart(src)  # start() cleans up after the evacuation
    assert back.claims_for_instance(inst.uuid) == []
    assert _consumer(placement, migration).allocations == {}
    assert placement.usages(back.tree.root.uuid).get("VCPU", 0) == 0
    report = back.audit(heal=False)
    assert [f.instance_uuid for f in report.findings] == [inst.uuid]  # the guest left behind
    assert report.findings[0].kind == "instance_without_claim"
    back.driver.destroy(inst.uuid)
    assert_books_agree(back, dst)


def test_explicit_evacuation_cleanup_and_rebuild_on_the_same_host(hosts, placement):
    src, dst = hosts(topology=SMALL), hosts(topology=SMALL)
    inst = instance(flavor(1, 512))
    src.instance_claim(inst)
    assert isinstance(src.rebuild_claim(inst), NopClaim)  # rebuild in place claims nothing
    with pytest.raises(InvalidRequest):
        dst.rebuild_claim(inst)  # elsewhere it needs a migration
    migration = new_uuid()
    moves.evacuate(dst, inst, migration, src.host)
    dst.confirm_migration(migration)
    assert src.cleanup_evacuated(inst.uuid, migration) == ["cleaned"]
    assert src.cleanup_evacuated(inst.uuid, migration) == []
    assert_books_agree(src, dst)


def test_evacuation_abort_gives_the_instance_back_to_the_dead_source(hosts, placement):
    src, dst = hosts(topology=SMALL), hosts(topology=SMALL)
    inst = instance(flavor(1, 512))
    src.instance_claim(inst)
    old = _consumer(placement, inst.uuid).allocations
    with pytest.raises(RuntimeError), dst.evacuate_claim(inst, new_uuid(), src.host):
        raise RuntimeError("rebuild failed")
    assert _consumer(placement, inst.uuid).allocations == old
    assert dst.claims_for_instance(inst.uuid) == []
    assert_books_agree(src, dst)


def test_move_claims_are_idempotent_and_refuse_inconsistent_requests(hosts, placement):
    src, dst = hosts(topology=SMALL), hosts(topology=SMALL)
    inst = instance(flavor(1, 512))
    src.instance_claim(inst)
    migration = new_uuid()
    context = src.begin_move_out(inst.uuid, migration)
    assert src.begin_move_out(inst.uuid, migration) == context
    first = dst.resize_claim(inst, flavor(2, 512), migration, context)
    assert dst.resize_claim(inst, flavor(2, 512), migration, context).claim_id == first.claim_id
    with pytest.raises(ClaimError):
        dst.evacuate_claim(inst, new_uuid(), src.host)  # already has a claim here
    with pytest.raises(ClaimError, match="cannot move"):
        src.begin_move_out(inst.uuid, new_uuid())  # already moving
    stranger = instance(flavor(1, 512))
    with pytest.raises(ClaimError, match="no allocations to move"):
        dst.evacuate_claim(stranger, new_uuid(), src.host)
    assert dst.claims_for_instance(stranger.uuid) == []
    moves.confirm_move(src, dst, migration)
    assert moves.confirm_move(src, dst, migration) == []  # confirming twice is harmless
    assert_books_agree(src, dst)


@pytest.mark.parametrize("outcome", ["confirm", "revert"])
def test_restarting_both_trackers_mid_migration_loses_nothing(hosts, placement, outcome):
    src, dst = hosts(cpu_dedicated_set="6-7"), hosts(cpu_dedicated_set="6-7")
    inst = instance(flavor(2, 1024, 5, cpu_policy="dedicated", pci=(PciRequest(1, resource_class=GPU),)))
    before = src.instance_claim(inst)
    migration = new_uuid()
    claim = moves.start_move(
        src,
        dst,
        inst,
        migration,
        new_flavor=flavor(2, 2048, 5, cpu_policy="dedicated", pci=(PciRequest(2, resource_class="SRIOV_NET_VF"),)),
    )
    views = (src.capacity(), dst.capacity())

    src, dst = hosts.restart(src), hosts.restart(dst)  # both agents restart mid-migration

    [outgoing] = src.claims_for_instance(inst.uuid)
    [incoming] = dst.claims_for_instance(inst.uuid)
    assert outgoing.state == OUTGOING and outgoing.numa == before.numa and outgoing.pci == before.pci
    assert incoming.record == claim.record  # the migration context and all
    assert incoming.migration_context.old_pci == before.pci
    assert (src.capacity(), dst.capacity()) == views
    assert_books_agree(src, dst)

    if outcome == "confirm":
        moves.confirm_move(src, dst, migration)
        assert [c.state for c in dst.claims_for_instance(inst.uuid)] == [ACTIVE]
        assert src.claims_for_instance(inst.uuid) == []
    else:
        moves.revert_move(src, dst, migration)
        [back] = src.claims_for_instance(inst.uuid)
        assert back.numa == before.numa and back.pci == before.pci
        assert dst.claims_for_instance(inst.uuid) == []
    assert _consumer(placement, migration).allocations == {}
    assert_books_agree(src, dst)


def test_crash_during_revert_is_finished_by_the_restarted_tracker(hosts, placement):
    src, dst = hosts(topology=SMALL), hosts(topology=SMALL)
    inst = instance(flavor(2, 1024))
    src.instance_claim(inst)
    old = _consumer(placement, inst.uuid).allocations
    migration = new_uuid()
    moves.start_move(src, dst, inst, migration, new_flavor=flavor(3, 1024))

    class Crash(BaseException):
        pass

    real = dst.placement.write_consumers

    def write_then_die(writes):
        real(writes)
        raise Crash()

    dst.placement.write_consumers = write_then_die
    with pytest.raises(Crash):
        dst.revert_migration(migration)
    dst = hosts.restart(dst)
    assert dst.claims_for_instance(inst.uuid) == []
    src.revert_migration(migration)
    assert _consumer(placement, inst.uuid).allocations == old
    assert_books_agree(src, dst)


def test_source_side_revert_works_when_the_destination_is_gone(hosts, placement):
    src, dst = hosts(topology=SMALL), hosts(topology=SMALL)
    inst = instance(flavor(2, 1024))
    src.instance_claim(inst)
    old = _consumer(placement, inst.uuid).allocations
    migration = new_uuid()
    moves.start_move(src, dst, inst, migration, new_flavor=flavor(3, 1024))
    assert src.revert_migration(migration) == ["restored"]  # the destination never hears of it
    assert _consumer(placement, inst.uuid).allocations == old
    assert_books_agree(src)
    report = dst.audit(heal=True)  # its audit finds the stale half
    assert [f.kind for f in report.findings if f.kind != "usage_mismatch"] == ["stale_move"]
    assert dst.claims_for_instance(inst.uuid) == []
    assert_books_agree(src, dst)
