"""Server groups through the conductor: a build naming a group hands it to the scheduler, whose
group filters (or the service's pick, which applies the same policy) place the members.

Each test weighs so that, without the group, the two builds would land the other way: packing
puts both on one host (the anti-affinity test), spreading puts them on two (the affinity test).
"""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest
from conductorhelpers import BIGGER, PLAIN, assert_books_agree, assert_nothing_left, claims_of, server

from berth.conductor.journal import DONE
from berth.conductor.requests import ServerRequest
from berth.scheduler.request.flavor import Flavor
from berth.scheduler.request.server_group import ServerGroup
from berth.scheduler.settings import SelectionSettings

pytestmark = pytest.mark.slow

GROUP_FILTERS = ("ServerGroupAntiAffinityFilter", "ServerGroupAffinityFilter")


def members(count):
    return [str(uuid.uuid4()) for _ in range(count)]


def build_all(conductor, uuids, group):
    """Each member built in turn; the host each landed on."""
    hosts = []
    for instance in uuids:
        operation = conductor.build(replace(server(instance, PLAIN), server_group=group))
        assert operation.state == DONE
        hosts.append(operation.selections["host"])
    return hosts


def delete_all(conductor, placement, clients, uuids):
    for instance in uuids:
        conductor.delete(instance)
    assert_nothing_left(placement, clients, *uuids)


@pytest.mark.parametrize("use_pick", [True, False], ids=["pick", "placement"])
def test_anti_affinity_puts_two_builds_on_different_hosts(conductors, placement, clients, use_pick):
    settings = SelectionSettings(enabled_filters=GROUP_FILTERS, weigh_policy="pack", use_pick_extension=use_pick)
    conductor = conductors(settings=settings)
    uuids = members(2)
    group = ServerGroup(str(uuid.uuid4()), "anti-affinity", frozenset(uuids))
    first, second = build_all(conductor, uuids, group)
    assert first != second
    assert conductor.runner.selector.last_path == ("pick" if use_pick else "placement")
    assert {host for instance in uuids for host in claims_of(clients, instance)} == {first, second}
    assert_books_agree(placement, clients)
    # The group reached the journal too: the request kept says which group it was.
    (operation,) = [o for o in conductor.journal.for_instance(uuids[1]) if o.kind == "build"]
    assert ServerRequest.from_dict(operation.request).server_group == group
    delete_all(conductor, placement, clients, uuids)


def test_packing_without_a_group_would_share_a_host(conductors, placement, clients):
    """The control of the test above: the same settings with no group put both on one host."""
    settings = SelectionSettings(enabled_filters=GROUP_FILTERS, weigh_policy="pack")
    conductor = conductors(settings=settings)
    uuids = members(2)
    first, second = build_all(conductor, uuids, None)
    assert first == second
    delete_all(conductor, placement, clients, uuids)


@pytest.mark.parametrize("use_pick", [True, False], ids=["pick", "placement"])
def test_affinity_puts_two_builds_on_the_same_host(conductors, placement, clients, use_pick):
    settings = SelectionSettings(enabled_filters=GROUP_FILTERS, weigh_policy="spread", use_pick_extension=use_pick)
    conductor = conductors(settings=settings)
    uuids = members(2)
    group = ServerGroup(str(uuid.uuid4()), "affinity", frozenset(uuids))
    first, second = build_all(conductor, uuids, group)
    assert first == second
    assert_books_agree(placement, clients)
    delete_all(conductor, placement, clients, uuids)


def test_spreading_without_a_group_would_use_two_hosts(conductors, placement, clients):
    settings = SelectionSettings(enabled_filters=GROUP_FILTERS, weigh_policy="spread")
    conductor = conductors(settings=settings)
    uuids = members(2)
    first, second = build_all(conductor, uuids, None)
    assert first != second
    delete_all(conductor, placement, clients, uuids)


@pytest.mark.parametrize("policy", ["soft-anti-affinity", "soft-affinity"])
def test_soft_policies_weigh_the_members(conductors, placement, clients, policy):
    """The soft policies are weighers: against the weigh policy that would do otherwise, the
    group's weigher (a multiplier far above the resources') decides."""
    weigh = "pack" if policy == "soft-anti-affinity" else "spread"
    multiplier = "soft_anti_affinity" if policy == "soft-anti-affinity" else "soft_affinity"
    settings = SelectionSettings(enabled_filters=GROUP_FILTERS, weigh_policy=weigh, multipliers={multiplier: 1000.0})
    conductor = conductors(settings=settings)
    uuids = members(2)
    group = ServerGroup(str(uuid.uuid4()), policy, frozenset(uuids))
    first, second = build_all(conductor, uuids, group)
    assert (first != second) if policy == "soft-anti-affinity" else (first == second)
    delete_all(conductor, placement, clients, uuids)


@pytest.mark.parametrize("use_pick", [True, False], ids=["pick", "placement"])
def test_the_agents_keep_members_apart_when_the_scheduler_does_not(conductors, placement, clients, use_pick):
    """With no group filter the scheduler packs both members on one host; the second's claim is
    refused there by the agent, and the build goes to its alternate."""
    settings = SelectionSettings(enabled_filters=(), weigh_policy="pack", use_pick_extension=use_pick)
    conductor = conductors(settings=settings)
    uuids = members(2)
    group = ServerGroup(str(uuid.uuid4()), "anti-affinity", frozenset(uuids))
    first, second = build_all(conductor, uuids, group)
    assert first != second
    (operation,) = [o for o in conductor.journal.for_instance(uuids[1]) if o.kind == "build"]
    assert [a["host"] for a in operation.attempts] == [first]
    assert "anti-affinity server group" in operation.attempts[0]["reason"]
    assert_books_agree(placement, clients)
    delete_all(conductor, placement, clients, uuids)


# More memory than the wide host has: a resize to it must leave that host.
LARGE = Flavor("m1.large", vcpus=1, memory_mb=10240, root_gb=1)


@pytest.mark.parametrize("use_pick", [True, False], ids=["pick", "placement"])
def test_a_resize_keeps_its_group_apart(conductors, placement, clients, use_pick):
    """Packing puts the first member on the wide host (least memory) and the second on a narrow
    one. Resized beyond the wide host, the first would pack next to the second; its group sends
    it to the other narrow host, and the scheduler alone decides that (no host refuses it)."""
    settings = SelectionSettings(enabled_filters=GROUP_FILTERS, weigh_policy="pack", use_pick_extension=use_pick)
    conductor = conductors(settings=settings)
    uuids = members(2)
    group = ServerGroup(str(uuid.uuid4()), "anti-affinity", frozenset(uuids))
    first, second = build_all(conductor, uuids, group)
    assert first == "wide"
    moved = conductor.resize(replace(server(uuids[0], PLAIN), server_group=group), LARGE)
    assert moved.state == DONE
    assert moved.selections["dest"] not in (first, second)
    assert moved.attempts == []
    conductor.confirm_resize(moved.id)
    assert set(claims_of(clients, uuids[0])) == {moved.selections["dest"]}
    assert_books_agree(placement, clients)
    delete_all(conductor, placement, clients, uuids)


@pytest.mark.parametrize("use_pick", [True, False], ids=["pick", "placement"])
def test_a_lone_member_of_anti_affinity_may_be_resized_on_its_own_host(conductors, placement, clients, use_pick):
    """Packing prefers the host the member is on; the member does not keep itself off it, as
    Nova's filter does not count the instance being moved (the service's pick is told which it is)."""
    settings = SelectionSettings(enabled_filters=GROUP_FILTERS, weigh_policy="pack", use_pick_extension=use_pick)
    conductor = conductors(settings=settings)
    [only] = members(1)
    group = ServerGroup(str(uuid.uuid4()), "anti-affinity", frozenset({only}))
    [host] = build_all(conductor, [only], group)
    moved = conductor.resize(replace(server(only, PLAIN), server_group=group), BIGGER)
    assert moved.state == DONE, moved.error
    assert moved.selections["dest"] == host
    conductor.confirm_resize(moved.id)
    assert set(claims_of(clients, only)) == {host}
    assert_books_agree(placement, clients)
    delete_all(conductor, placement, clients, [only])
