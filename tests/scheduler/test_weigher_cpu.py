"""CPUWeigher: free VCPU and PCPU together."""

from __future__ import annotations

from hosthelpers import make_hosts
from weigherhelpers import names, ranked

from berth.scheduler.weighers.cpu import CPUWeigher


def test_floating_and_pinned_cpus_count_together():
    hosts = make_hosts(
        {
            "floating": {"resources": {"VCPU": (16, 4)}},  # 12 free
            "mixed": {"resources": {"VCPU": (8, 0), "PCPU": (8, 2)}},  # 14 free
            "busy": {"resources": {"VCPU": (16, 14)}},  # 2 free
        }
    )
    assert ranked(hosts, [CPUWeigher()]) == [("mixed", 1.0), ("floating", 0.833333), ("busy", 0.0)]
    assert names(hosts, [CPUWeigher()], multipliers={"cpu": -1.0}) == ["busy", "floating", "mixed"]


def test_equal_hosts_weigh_0():
    hosts = make_hosts({"a": {"resources": {"VCPU": (8, 0)}}, "b": {"resources": {"VCPU": (8, 0)}}})
    assert sorted(ranked(hosts, [CPUWeigher()])) == [("a", 0.0), ("b", 0.0)]
