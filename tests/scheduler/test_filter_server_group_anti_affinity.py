"""ServerGroupAntiAffinityFilter: a host holds at most max_server_per_host members of the group."""

from __future__ import annotations

import pytest
from hosthelpers import make_filter, make_host, request
from schedulerhelpers import spec

from berth.scheduler.errors import SpecError
from berth.scheduler.filters.server_group_anti_affinity import ServerGroupAntiAffinityFilter
from berth.scheduler.request.server_group import ServerGroup

UUID = "7d1f1c8e-3c0a-4b7e-9a55-2f1c0e9d8b7a"


def test_a_host_holding_a_member_is_refused():
    check = make_filter(ServerGroupAntiAffinityFilter)
    build = request(spec(), group=ServerGroup(UUID, "anti-affinity", frozenset({"m1", "m2"})))
    assert check.applies(build)
    assert check.pick_covers(build)
    assert check.host_passes(make_host("a"), build)
    assert check.refusal(make_host("b", members={"m1"}), build) == (
        f"holds 1 member of anti-affinity group {UUID} (at most 1)"
    )


def test_the_max_server_per_host_rule():
    check = make_filter(ServerGroupAntiAffinityFilter)
    build = request(spec(), group=ServerGroup(UUID, "anti-affinity", frozenset({"m1", "m2", "m3"}), 2))
    assert not check.pick_covers(build)  # the service keeps one per host only
    assert check.host_passes(make_host("a", members={"m1"}), build)
    assert check.refusal(make_host("b", members={"m1", "m2"}), build) == (
        f"holds 2 members of anti-affinity group {UUID} (at most 2)"
    )


def test_placing_a_member_counts_at_once():
    check = make_filter(ServerGroupAntiAffinityFilter)
    build = request(spec(), group=ServerGroup(UUID, "anti-affinity", frozenset({"m1"})))
    host = make_host("a")
    host.consume(host.requests[0], "m1", None, member=True)
    assert not check.host_passes(host, build)


def test_other_policies_are_not_filtered_here():
    check = make_filter(ServerGroupAntiAffinityFilter)
    assert not check.applies(request(spec()))
    assert not check.applies(request(spec(), group=ServerGroup(UUID, "soft-anti-affinity")))


@pytest.mark.parametrize(
    ("policy", "rule", "problem"),
    [("anti", 1, "policy 'anti'"), ("anti-affinity", 0, "at least 1"), ("affinity", 2, "anti-affinity policy only")],
)
def test_a_bad_group_is_refused(policy, rule, problem):
    with pytest.raises(SpecError, match=problem):
        ServerGroup(UUID, policy, max_server_per_host=rule)
