"""A conductor's mistakes and races in a move, sent to two ``berth agent`` processes over HTTP: a
migration uuid that is not a migration's own, a revert sent after the source confirmed. Neither may
cost an instance its allocations in the service, nor leave a consumer without the claim that counts
it."""

from __future__ import annotations

import pytest
from agenthelpers import assert_remote_books_agree, two_agents
from trackerhelpers import flavor, instance, new_uuid

from berth.clients.errors import ClaimError, ClaimStateError, InvalidRequest
from berth.domain.host.records import ACTIVE, INCOMING
from berth.tracker.moving import moves


@pytest.fixture(scope="module")
def agents(placement_service, tmp_path_factory):
    with two_agents(placement_service.url, tmp_path_factory.mktemp("agents")) as pair:
        yield pair


def test_a_migration_named_after_its_own_instance_is_refused_by_the_source(agents, placement):
    src, dst = (agent.client for agent in agents)
    inst = instance(flavor(1, 512, 1))
    claim = src.instance_claim(inst)
    with pytest.raises(InvalidRequest, match="a migration needs a uuid of its own"):
        src.begin_move_out(inst.uuid, inst.uuid)
    # What the conductor does after a failed step: revert. The instance keeps what it holds.
    src.revert_migration(inst.uuid)
    assert [c.state for c in src.claims_for_instance(inst.uuid)] == [ACTIVE]
    assert placement.consumer(inst.uuid).allocations == claim.allocations
    assert_remote_books_agree(placement, src, dst)
    src.delete_instance(inst.uuid)


def test_a_migration_named_after_another_instance_here_is_refused_by_the_source(agents, placement):
    src, dst = (agent.client for agent in agents)
    moving, other = instance(flavor(1, 512, 1)), instance(flavor(2, 1024, 1))
    src.instance_claim(moving)
    kept = src.instance_claim(other)
    with pytest.raises(InvalidRequest, match=f"migration {other.uuid} is already {other.uuid}'s"):
        src.begin_move_out(moving.uuid, other.uuid)
    src.revert_migration(other.uuid)
    assert placement.consumer(other.uuid).allocations == kept.allocations
    assert_remote_books_agree(placement, src, dst)
    src.delete_instance(moving.uuid)
    src.delete_instance(other.uuid)


def test_a_migration_named_after_an_instance_of_another_host_takes_nothing_from_it(agents, placement):
    src, dst = (agent.client for agent in agents)
    moving, elsewhere = instance(flavor(1, 512, 1)), instance(flavor(2, 1024, 1))
    mine = src.instance_claim(moving)
    theirs = dst.instance_claim(elsewhere)
    # The source cannot know the uuid is another host's instance; the destination refuses the claim.
    context = src.begin_move_out(moving.uuid, elsewhere.uuid)
    with pytest.raises(ClaimError, match="already holds allocations"):
        dst.resize_claim(moving, moving.flavor, elsewhere.uuid, context)
    # Confirmed by mistake, the move is refused (nothing arrived); reverted, the source takes back
    # only what is its own.
    with pytest.raises(ClaimError, match="never reached its destination"):
        src.confirm_migration(elsewhere.uuid)
    assert src.revert_migration(elsewhere.uuid) == ["restored"]
    assert placement.consumer(moving.uuid).allocations == mine.allocations
    assert placement.consumer(elsewhere.uuid).allocations == theirs.allocations
    assert [c.state for c in src.claims_for_instance(moving.uuid)] == [ACTIVE]
    assert_remote_books_agree(placement, src, dst)
    src.delete_instance(moving.uuid)
    dst.delete_instance(elsewhere.uuid)


def test_a_revert_sent_to_the_destination_after_the_source_confirmed_is_refused(agents, placement):
    src, dst = (agent.client for agent in agents)
    inst = instance(flavor(1, 512, 1))
    src.instance_claim(inst)
    migration = new_uuid()
    moved = moves.start_move(src, dst, inst, migration, new_flavor=flavor(2, 1024, 1))
    assert src.confirm_migration(migration) == ["confirmed"]
    # Another conductor (or a retry that changed its mind) reverts: the destination's claim is all
    # the instance has, and it holds the destination's allocations.
    for revert in (
        lambda: dst.revert_migration(migration),
        lambda: dst.drop_move_claim(migration),
        lambda: dst.abort(moved.claim_id),
    ):
        with pytest.raises(ClaimStateError, match="confirmed on its source"):
            revert()
        assert [c.state for c in dst.claims_for_instance(inst.uuid)] == [INCOMING]
    assert placement.consumer(inst.uuid).allocations == moved.allocations
    assert dst.confirm_migration(migration) == ["finished"]
    assert [c.state for c in dst.claims_for_instance(inst.uuid)] == [ACTIVE]
    assert_remote_books_agree(placement, src, dst)
    dst.delete_instance(inst.uuid)


def test_a_revert_after_the_source_reverted_still_lets_go(agents, placement):
    """The source swaps back by itself when the destination is away; the destination's revert,
    when it comes, drops its claim as before."""
    src, dst = (agent.client for agent in agents)
    inst = instance(flavor(1, 512, 1))
    claim = src.instance_claim(inst)
    migration = new_uuid()
    moves.start_move(src, dst, inst, migration, new_flavor=flavor(2, 1024, 1))
    assert src.revert_migration(migration) == ["restored"]
    assert dst.revert_migration(migration) == ["reverted"]
    assert dst.claims_for_instance(inst.uuid) == []
    assert placement.consumer(inst.uuid).allocations == claim.allocations
    assert_remote_books_agree(placement, src, dst)
    src.delete_instance(inst.uuid)
