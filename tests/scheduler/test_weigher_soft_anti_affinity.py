"""ServerGroupSoftAntiAffinityWeigher: soft-anti-affinity prefers the hosts holding fewest members."""

from __future__ import annotations

from hosthelpers import make_hosts, request
from schedulerhelpers import spec
from weigherhelpers import ranked

from berth.scheduler.request.server_group import ServerGroup
from berth.scheduler.weighers.soft_anti_affinity import ServerGroupSoftAntiAffinityWeigher

UUID = "2c9d3f0a-7b1e-4c5d-8e9f-0a1b2c3d4e5f"
HOSTS = {"two": {"members": {"m1", "m2"}}, "none": {}, "one": {"members": {"m3"}}}


def test_fewer_members_weigh_more():
    build = request(spec(), group=ServerGroup(UUID, "soft-anti-affinity"))
    assert ranked(make_hosts(HOSTS), [ServerGroupSoftAntiAffinityWeigher()], build) == [
        ("none", 1.0),
        ("one", 0.5),
        ("two", 0.0),
    ]


def test_a_member_placed_by_the_call_counts():
    build = request(spec(), group=ServerGroup(UUID, "soft-anti-affinity"))
    hosts = make_hosts({"a": {}, "b": {}})
    hosts[0].consume(hosts[0].requests[0], "m1", None, member=True)
    assert ranked(hosts, [ServerGroupSoftAntiAffinityWeigher()], build) == [("b", 1.0), ("a", 0.0)]


def test_other_policies_weigh_nothing():
    for build in (request(spec()), request(spec(), group=ServerGroup(UUID, "soft-affinity"))):
        weights = {weight for _, weight in ranked(make_hosts(HOSTS), [ServerGroupSoftAntiAffinityWeigher()], build)}
        assert weights == {0}
