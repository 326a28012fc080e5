"""The filters in order, the hosts the call filled, the draw among the best hosts, and the reasons
NoValidHost is made of. How far the agents are asked is in test_scheduler_ranked_hosts.py."""

from __future__ import annotations

import random

from hosthelpers import FixedSnapshots, make_filter, make_hosts, request, snapshot
from schedulerhelpers import CONFIG, ZONE_AGGREGATE, flavor, spec

from berth.scheduler.explain import FilterRun, describe_explain, nothing_left
from berth.scheduler.filters import enabled_filters
from berth.scheduler.filters.numa_topology import NUMATopologyFilter
from berth.scheduler.hosts.sorting import ROOM_LEFT, filter_hosts, sorted_hosts
from berth.scheduler.settings import SelectionSettings
from berth.scheduler.weighers import enabled_weighers

NUMA = request(spec(flavor_=flavor({"hw:numa_nodes": "1"}, vcpus=2), availability_zone="nova"))


def test_filters_run_in_order_and_the_agents_are_asked_about_survivors_only():
    snapshots = FixedSnapshots({"numa": snapshot("numa"), "in-az1": snapshot("in-az1")})
    hosts = make_hosts({"in-az1": {"aggregates": [ZONE_AGGREGATE]}, "numa": {}, "no-agent": {}}, snapshots)
    settings = SelectionSettings()
    ranked = sorted_hosts(
        hosts, NUMA, enabled_filters(settings, CONFIG), enabled_weighers(settings), settings, random.Random(1)
    )
    assert [h.name for h in ranked] == ["numa"]
    assert ranked.run.counts() == {"AvailabilityZoneFilter": 1, "NUMATopologyFilter": 1}
    assert sorted(snapshots.asked) == ["no-agent", "numa"]
    assert ranked.run.removed["NUMATopologyFilter"] == [("no-agent", "no agent is known for this host")]


def test_a_host_the_call_filled_is_left_out_first():
    hosts = make_hosts({"tiny": {"resources": {"VCPU": (1, 0), "MEMORY_MB": (512, 0), "DISK_GB": (1, 0)}}, "big": {}})
    hosts[0].consume(hosts[0].requests[0], "i1", None, member=False)
    left, run = filter_hosts(hosts, request(spec()), [])
    assert [h.name for h in left] == ["big"]
    assert list(run.removed) == [ROOM_LEFT]


def test_a_host_subset_draws_among_the_best():
    hosts = make_hosts(
        {
            name: {"resources": {"MEMORY_MB": (mb, 0)}, "ask": {"MEMORY_MB": 1}}
            for name, mb in (("a", 4), ("b", 3), ("c", 2))
        }
    )
    settings = SelectionSettings(host_subset_size=2)
    firsts = set()
    for seed in range(30):
        ranked = sorted_hosts(hosts, request(spec()), [], enabled_weighers(settings), settings, random.Random(seed))
        names = [h.name for h in ranked]
        firsts.add(names[0])
        assert sorted(names) == ["a", "b", "c"]
        assert names[1:] == [n for n in ("a", "b", "c") if n != names[0]]
    assert firsts == {"a", "b"}
    ranked = sorted_hosts(
        hosts, request(spec()), [], enabled_weighers(SelectionSettings()), SelectionSettings(), random.Random(1)
    )
    assert [h.name for h in ranked] == ["a", "b", "c"]


def test_the_message_names_each_filter_and_at_most_five_hosts():
    run = FilterRun(8)
    run.record("ComputeFilter", "h0", "disabled (COMPUTE_STATUS_DISABLED)")
    for i in range(1, 8):
        run.record("NUMATopologyFilter", f"h{i}", "NUMA cell 0: 1 MB free, 2 MB asked")
    error = nothing_left("instance i-1", "2 of 3", 8, run, ["h9"], "no host is left")
    assert error.filter_counts == {"ComputeFilter": 1, "NUMATopologyFilter": 7}
    text = str(error)
    assert text.startswith("No valid host for instance i-1 (2 of 3): of 8 hosts Placement offered, ")
    assert "ComputeFilter removed 1 (h0: disabled (COMPUTE_STATUS_DISABLED))" in text
    assert "NUMATopologyFilter removed 7 (h1: " in text and "h5: " in text and "h6" not in text
    assert "; and 2 more)" in text
    assert text.endswith("; the service refused the claims on h9; no host is left")


def test_the_services_count_keeps_the_conditions_that_excluded_something():
    report = {
        "providers": 5,
        "groups": [
            {
                "suffix": "",
                "conditions": [
                    {"kind": "inventory", "condition": "has VCPU inventory", "excluded": 2, "remaining": 3},
                    {"kind": "capacity", "condition": "has 64 VCPU free", "excluded": 3, "remaining": 0},
                    {"kind": "units", "condition": "allows 64 VCPU", "excluded": 0, "remaining": 0},
                ],
            },
            {"suffix": "_pci0_0", "conditions": [{"condition": "has trait X", "excluded": 1, "remaining": 4}]},
        ],
        "root": [{"condition": "root lacks traits COMPUTE_STATUS_DISABLED", "excluded": 0, "remaining": 5}],
    }
    assert describe_explain(report) == (
        "5 providers: the unsuffixed group: 2 excluded by 'has VCPU inventory' (3 left); "
        "the unsuffixed group: 3 excluded by 'has 64 VCPU free' (0 left); "
        "group '_pci0_0': 1 excluded by 'has trait X' (4 left)"
    )


def test_the_numa_filter_alone_on_a_host_without_agent():
    check = make_filter(NUMATopologyFilter)
    [host] = make_hosts({"lonely": {}})
    assert check.refusal(host, NUMA) == "no agent is known for this host"
