"""RAMWeigher: free memory of the host's tree, Nova's normalisation and multiplier."""

from __future__ import annotations

from hosthelpers import make_hosts
from weigherhelpers import names, ranked

from berth.scheduler.weighers.ram import RAMWeigher

HOSTS = {
    "big": {"resources": {"MEMORY_MB": (32768, 0)}},
    "half": {"resources": {"MEMORY_MB": (32768, 16384)}},
    "small": {"resources": {"MEMORY_MB": (8192, 0)}},
}


def test_spread_prefers_free_memory_normalised_between_0_and_1():
    assert ranked(make_hosts(HOSTS), [RAMWeigher()]) == [("big", 1.0), ("half", 0.333333), ("small", 0.0)]


def test_a_negative_multiplier_packs():
    assert names(make_hosts(HOSTS), [RAMWeigher()], multipliers={"ram": -2.0}) == ["small", "half", "big"]
    assert ranked(make_hosts(HOSTS), [RAMWeigher()], multipliers={"ram": -2.0})[-1] == ("big", -2.0)


def test_the_pack_policy_turns_it_round():
    assert names(make_hosts(HOSTS), [RAMWeigher()], weigh_policy="pack") == ["small", "half", "big"]


def test_what_the_call_placed_counts():
    hosts = make_hosts({"a": {"resources": {"MEMORY_MB": (4096, 0)}}, "b": {"resources": {"MEMORY_MB": (3072, 0)}}})
    assert names(hosts, [RAMWeigher()]) == ["a", "b"]
    hosts[0].consume(hosts[0].requests[0], "i1", None, member=False)  # 512 MB
    hosts[0].consume(hosts[0].requests[0], "i2", None, member=False)
    hosts[0].consume(hosts[0].requests[0], "i3", None, member=False)
    assert hosts[0].facts().free_ram_mb == 2560
    assert names(hosts, [RAMWeigher()]) == ["b", "a"]
