"""What each server operation does to claims: delete, soft delete, shelve, and their inverses."""

from __future__ import annotations

import pytest
from trackerhelpers import SMALL, assert_books_agree, flavor, instance, new_uuid

from berth.clients.errors import ClaimError, ClaimNotFound
from berth.domain.host.records import ACTIVE, SHELVED, SOFT_DELETED
from berth.tracker.moving import moves


def test_delete_frees_everything(hosts, placement):
    host = hosts(topology=SMALL)
    inst = instance(flavor(2, 1024, 10))
    host.instance_claim(inst)
    assert host.delete_instance(inst.uuid) == ["deleted"]
    assert host.claims_for_instance(inst.uuid) == []
    assert placement.consumer(inst.uuid).allocations == {}
    assert host.delete_instance(inst.uuid) == []  # deleting twice is harmless
    assert_books_agree(host)


def test_delete_during_a_migration_frees_both_sides(hosts, placement):
    src, dst = hosts(topology=SMALL), hosts(topology=SMALL)
    inst = instance(flavor(2, 1024))
    src.instance_claim(inst)
    migration = new_uuid()
    moves.start_move(src, dst, inst, migration, new_flavor=flavor(3, 1024))
    assert dst.delete_instance(inst.uuid) == ["deleted"]
    assert placement.consumer(inst.uuid).allocations == {}
    assert placement.consumer(migration).allocations == {}
    assert_books_agree(dst)
    src.audit(heal=True)  # the source learns at its next audit
    assert src.claims_for_instance(inst.uuid) == []
    assert_books_agree(src)


def test_soft_delete_keeps_claims_until_hard_delete_or_reclaim(hosts, placement):
    host = hosts(topology=SMALL)
    kept, reclaimed, restored = (instance(flavor(1, 512)) for _ in range(3))
    for inst in (kept, reclaimed, restored):
        host.instance_claim(inst)
        assert [c.state for c in host.soft_delete_instance(inst.uuid)] == [SOFT_DELETED]
    assert placement.usages(host.tree.root.uuid)["VCPU"] == 3  # still counted
    assert_books_agree(host)

    assert [c.state for c in host.restore_instance(restored.uuid)] == [ACTIVE]
    assert host.reclaim_soft_deleted() == []  # no reclaim period configured
    assert host.reclaim_soft_deleted(older_than=3600) == []  # not old enough
    host.store.update(host.store.for_instance(reclaimed.uuid)[0], state_changed_at=0.0)
    assert host.reclaim_soft_deleted(older_than=3600) == [reclaimed.uuid]
    assert placement.consumer(reclaimed.uuid).allocations == {}
    assert host.delete_instance(kept.uuid) == ["deleted"]  # hard delete
    assert placement.usages(host.tree.root.uuid)["VCPU"] == 1
    assert_books_agree(host)

    assert [c.state for c in host.restore_instance(restored.uuid)] == [ACTIVE]  # twice is harmless
    host.shelve_instance(restored.uuid)
    with pytest.raises(ClaimError, match="shelved"):
        host.restore_instance(restored.uuid)  # only a soft-deleted instance is restored
    with pytest.raises(ClaimNotFound):
        host.soft_delete_instance(new_uuid())


def test_soft_delete_is_refused_while_moving(hosts):
    src, dst = hosts(topology=SMALL), hosts(topology=SMALL)
    inst = instance(flavor(1, 512))
    src.instance_claim(inst)
    moves.start_move(src, dst, inst, new_uuid(), kind="live_migration")
    with pytest.raises(ClaimError, match="outgoing"):
        src.soft_delete_instance(inst.uuid)
    with pytest.raises(ClaimError, match="moving"):
        src.shelve_offload_instance(inst.uuid)


def test_shelve_keeps_claims_until_offload(hosts, placement):
    host = hosts(topology=SMALL)
    inst = instance(flavor(2, 1024, 5))
    first = host.instance_claim(inst)
    assert [c.state for c in host.shelve_instance(inst.uuid)] == [SHELVED]
    assert placement.consumer(inst.uuid).allocations
    assert_books_agree(host)

    same = host.unshelve_claim(inst)  # not offloaded: the same claim again
    assert same.claim_id == first.claim_id and same.state == ACTIVE
    host.shelve_instance(inst.uuid)
    assert host.shelve_offload_instance(inst.uuid) == ["released"]
    assert placement.consumer(inst.uuid).allocations == {}
    assert host.claims_for_instance(inst.uuid) == []
    assert_books_agree(host)

    other = hosts(topology=SMALL)
    fresh = other.unshelve_claim(inst)  # offloaded: a new claim wherever it lands
    assert fresh.claim_id != first.claim_id
    assert set(placement.consumer(inst.uuid).allocations) == {other.tree.root.uuid}
    assert_books_agree(host, other)


def test_a_claim_for_an_instance_living_elsewhere_is_refused(hosts, placement):
    one, two = hosts(topology=SMALL), hosts(topology=SMALL)
    inst = instance(flavor(1, 512))
    one.instance_claim(inst)
    with pytest.raises(ClaimError, match="move claim"):
        two.instance_claim(inst)
    assert two.claims_for_instance(inst.uuid) == []
    assert_books_agree(one, two)
