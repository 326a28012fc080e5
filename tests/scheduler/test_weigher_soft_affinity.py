"""ServerGroupSoftAffinityWeigher: soft-affinity prefers the hosts holding members."""

from __future__ import annotations

from hosthelpers import make_hosts, request
from schedulerhelpers import spec
from weigherhelpers import ranked

from berth.scheduler.request.server_group import ServerGroup
from berth.scheduler.weighers.soft_affinity import ServerGroupSoftAffinityWeigher

UUID = "2c9d3f0a-7b1e-4c5d-8e9f-0a1b2c3d4e5f"
HOSTS = {"two": {"members": {"m1", "m2"}}, "none": {}, "one": {"members": {"m3"}}}


def test_more_members_weigh_more():
    build = request(spec(), group=ServerGroup(UUID, "soft-affinity"))
    assert ranked(make_hosts(HOSTS), [ServerGroupSoftAffinityWeigher()], build) == [
        ("two", 1.0),
        ("one", 0.5),
        ("none", 0.0),
    ]
    weighed = ranked(make_hosts(HOSTS), [ServerGroupSoftAffinityWeigher()], build, multipliers={"soft_affinity": 3})
    assert weighed[0] == ("two", 3.0)


def test_other_policies_weigh_nothing():
    for build in (request(spec()), request(spec(), group=ServerGroup(UUID, "soft-anti-affinity"))):
        assert {weight for _, weight in ranked(make_hosts(HOSTS), [ServerGroupSoftAffinityWeigher()], build)} == {0}
