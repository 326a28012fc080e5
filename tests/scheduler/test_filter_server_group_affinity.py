"""ServerGroupAffinityFilter: once a member is placed, the others follow it."""

from __future__ import annotations

from hosthelpers import make_filter, make_host, request, uuid_of
from schedulerhelpers import spec

from berth.scheduler.filters.server_group_affinity import ServerGroupAffinityFilter
from berth.scheduler.request.server_group import ServerGroup

GROUP = ServerGroup("0b6a0bd5-5b8e-4f7f-9f62-0d9c6a1b2c3d", "affinity", frozenset({"m1", "m2"}))


def test_no_member_placed_yet_any_host_passes():
    check = make_filter(ServerGroupAffinityFilter)
    build = request(spec(), group=GROUP)
    assert check.applies(build)
    assert check.host_passes(make_host("a"), build)


def test_only_the_members_host_passes_even_when_it_is_no_candidate():
    check = make_filter(ServerGroupAffinityFilter)
    build = request(spec(), group=GROUP, group_hosts={uuid_of("a")})
    assert check.host_passes(make_host("a"), build)
    assert check.refusal(make_host("b"), build) == f"the members of affinity group {GROUP.uuid} are on another host"
    full = request(spec(), group=GROUP, group_hosts={uuid_of("full")})
    assert not check.host_passes(make_host("a"), full)


def test_other_policies_are_not_filtered_here():
    check = make_filter(ServerGroupAffinityFilter)
    assert not check.applies(request(spec()))
    for policy in ("anti-affinity", "soft-affinity", "soft-anti-affinity"):
        assert not check.applies(request(spec(), group=ServerGroup(GROUP.uuid, policy)))
