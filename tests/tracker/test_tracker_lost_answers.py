"""A tracker whose write to the service was done but whose answer was lost (the service's worker
killed under it) finds the write done when it tries again; through a real proxy that loses one answer."""

from __future__ import annotations

from answerdropper import AnswerDropper
from trackerhelpers import assert_books_agree, flavor, instance, new_uuid

from berth.clients.placement import PlacementClient
from berth.domain.host.records import INCOMING, OUTGOING
from berth.tracker.moving import moves


def test_a_move_claim_whose_answer_was_lost_is_found_done(hosts, placement, placement_service):
    proxy = AnswerDropper(placement_service.url)
    try:
        src, dst = hosts(), hosts()
        dst = hosts.restart(dst, placement=PlacementClient(proxy.url))
        inst = instance(flavor(2, 1024, 5))
        src.instance_claim(inst)
        old = placement.consumer(inst.uuid).allocations
        migration = new_uuid()
        proxy.drop_next("POST", "/allocations")
        claim = moves.start_move(src, dst, inst, migration, new_flavor=flavor(2, 2048, 5))
        assert proxy.dropped == [("POST", "/allocations")]
        assert claim.state == INCOMING
        assert placement.consumer(migration).allocations == old
        assert set(placement.consumer(inst.uuid).allocations) <= dst.our_providers()
        assert [c.state for c in src.claims_for_instance(inst.uuid)] == [OUTGOING]
        assert_books_agree(src, dst)
    finally:
        proxy.close()
