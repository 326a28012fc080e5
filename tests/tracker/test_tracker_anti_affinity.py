"""The host's claim checks an anti-affinity group again, under the host's lock, against its own
claims (``berth.domain.host.anti_affinity``): trackers against a real ``berth serve``, and one agent
process over HTTP."""

from __future__ import annotations

import dataclasses

import pytest
from agenthelpers import Agent
from trackerhelpers import flavor, instance, new_uuid

from berth.clients.errors import ClaimFailed
from berth.domain.host.anti_affinity import AntiAffinity
from berth.domain.host.errors import InvalidHostRequest
from berth.domain.host.request import InstanceSpec
from berth.tracker.moving import moves


def members(count):
    return [new_uuid() for _ in range(count)]


def member(uuid_, group, **kw):
    return dataclasses.replace(instance(flavor(1, 512, 1)), uuid=uuid_, anti_affinity=group, **kw)


def test_a_second_member_is_refused_where_one_is_and_others_are_not(hosts):
    first, second = hosts(), hosts()
    a, b, c = members(3)
    group = AntiAffinity(new_uuid(), frozenset({a, b}))
    first.instance_claim(member(a, group))
    with pytest.raises(ClaimFailed, match=f"anti-affinity server group {group.uuid}.*{a}"):
        first.instance_claim(member(b, group))
    assert first.claims_for_instance(b) == []
    # Someone outside the group, or the member on another host, is not concerned.
    first.instance_claim(member(c, None))
    second.instance_claim(member(b, group))


def test_a_member_that_joined_later_is_known_by_the_group_its_claim_declared(hosts):
    """A's request was made before B joined the group: it names only A. B's claim, made first on
    the host, declared the group, so A is refused all the same, and the claim keeps the group."""
    host = hosts()
    a, b = members(2)
    group = new_uuid()
    host.instance_claim(member(b, AntiAffinity(group, frozenset({a, b}))))
    with pytest.raises(ClaimFailed, match=f"holds {b}"):
        host.instance_claim(member(a, AntiAffinity(group, frozenset({a}))))
    (claim,) = host.claims_for_instance(b)
    assert claim.anti_affinity_group == group
    assert host.claims_for_instance(a) == []


def test_max_per_host_admits_that_many(hosts):
    host = hosts()
    a, b, c = members(3)
    group = AntiAffinity(new_uuid(), frozenset({a, b, c}), max_per_host=2)
    host.instance_claim(member(a, group))
    host.instance_claim(member(b, group))
    with pytest.raises(ClaimFailed, match="allows 2 member"):
        host.instance_claim(member(c, group))


def test_a_move_counts_on_its_source_and_never_against_itself(hosts):
    src, dst, third = hosts(), hosts(), hosts()
    a, b = members(2)
    group = AntiAffinity(new_uuid(), frozenset({a, b}))
    moving = member(a, group)
    src.instance_claim(moving)
    # A resize on its own host: the instance is no other member.
    migration = new_uuid()
    moves.start_move(src, src, moving, migration, new_flavor=flavor(2, 512, 1))
    moves.revert_move(src, src, migration)
    # While it moves away, its source keeps its place: a revert would bring it back.
    moves.start_move(src, dst, moving, new_uuid(), new_flavor=flavor(1, 512, 1))
    with pytest.raises(ClaimFailed, match="anti-affinity"):
        src.instance_claim(member(b, group))
    # And a member cannot move onto a host the other is arriving on.
    other = member(b, group)
    third.instance_claim(other)
    with pytest.raises(ClaimFailed, match="anti-affinity"):
        moves.start_move(third, dst, other, new_uuid(), new_flavor=flavor(1, 512, 1))


def test_an_agent_refuses_a_member_over_http(placement_service, tmp_path):
    agent = Agent(placement_service.url, tmp_path)
    try:
        a, b = members(2)
        group = AntiAffinity(new_uuid(), frozenset({a, b}))
        claim = agent.client.instance_claim(member(a, group))
        assert claim.record.anti_affinity_group == group.uuid
        with pytest.raises(ClaimFailed, match=f"holds {a}"):
            agent.client.instance_claim(member(b, group))
        with pytest.raises(ClaimFailed, match="anti-affinity"):
            agent.client.unshelve_claim(member(b, group))
        agent.client.instance_claim(member(b, None))
    finally:
        log = agent.stop()
    assert "Traceback" not in log, log


def test_the_rule_travels_with_the_instance_and_bad_ones_are_refused():
    a = new_uuid()
    spec = member(a, AntiAffinity(new_uuid(), frozenset({a, new_uuid()}), max_per_host=3))
    assert InstanceSpec.from_dict(spec.to_dict()) == spec
    assert "anti_affinity" not in member(a, None).to_dict()
    for bad in ({"members": [a]}, {"uuid": new_uuid(), "members": ["x"]}, {"uuid": new_uuid(), "max_per_host": 0}):
        with pytest.raises(InvalidHostRequest, match="anti_affinity"):
            InstanceSpec.from_dict({**spec.to_dict(), "anti_affinity": bad})
