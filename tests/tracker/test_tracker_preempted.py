"""A claim for an instance the service made room for by preemption: the victims' claims on the host
go first, so that the host does not refuse the room the service freed."""

from __future__ import annotations

import pytest
from trackerhelpers import assert_books_agree, flavor, instance, new_uuid

from berth.clients.errors import ClaimFailed


def _preempting_pick(placement, inst, root):
    """The service's pick of priority 5 for ``inst`` on ``root``, removing what it must there."""
    answer = placement.request(
        "POST",
        "/berth/pick",
        {
            "query": {"resources": "VCPU:8,MEMORY_MB:1024,DISK_GB:1", "in_tree": root},
            "consumer": {
                "uuid": inst.uuid,
                "project_id": inst.project_id,
                "user_id": inst.user_id,
                "consumer_type": "INSTANCE",
            },
            "priority": 5,
            "preempt": True,
        },
    )
    return [v["consumer_uuid"] for v in answer["preempted"]]


def test_the_victims_claims_are_dropped_before_the_new_instance_claims(hosts, placement):
    host = hosts()
    victim = instance(flavor(8, 1024, 1))
    host.instance_claim(victim)
    newcomer = instance(flavor(8, 1024, 1))
    assert _preempting_pick(placement, newcomer, host.tree.root.uuid) == [victim.uuid]
    # The service holds the newcomer's allocations (the pick's); the host's claim writes the same.
    with pytest.raises(ClaimFailed):  # the victim's claim still counts on the host
        host.instance_claim(newcomer)
    claim = host.instance_claim(newcomer, preempted=[victim.uuid])

    assert claim.instance_uuid == newcomer.uuid
    assert host.claims_for_instance(victim.uuid) == []
    assert placement.consumer(victim.uuid).allocations == {}
    assert_books_agree(host)


def test_a_consumer_that_still_holds_allocations_here_keeps_its_claims(hosts, placement):
    host = hosts()
    holder = instance(flavor(4, 512, 1))
    host.instance_claim(holder)
    newcomer = instance(flavor(2, 512, 1))

    host.instance_claim(newcomer, preempted=[holder.uuid, new_uuid()])

    assert len(host.claims_for_instance(holder.uuid)) == 1
    assert placement.consumer(holder.uuid).allocations
    assert_books_agree(host)
