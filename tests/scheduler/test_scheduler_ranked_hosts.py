"""The filters that ask the agents run on the ranked hosts one at a time, only as far as the caller
walks: the same hosts in the same order as running every filter over every host first, at the cost
of the snapshots of the hosts reached, and the same reasons once the walk has reached the end."""

from __future__ import annotations

import random
from typing import ClassVar

from hosthelpers import FixedSnapshots, make_filter, make_hosts, request, snapshot
from hypothesis import given
from hypothesis import strategies as st
from schedulerhelpers import flavor, spec

from berth.scheduler.filters.base import HostFilter
from berth.scheduler.filters.numa_topology import NUMATopologyFilter
from berth.scheduler.hosts.host_state import HostState
from berth.scheduler.hosts.sorting import filter_hosts, sorted_hosts
from berth.scheduler.request.build_request import BuildRequest
from berth.scheduler.settings import SelectionSettings
from berth.scheduler.weighers import enabled_weighers
from berth.scheduler.weighers.ranking import rank

NUMA = request(spec(flavor_=flavor({"hw:numa_nodes": "1"}, vcpus=2)))
NAMES = [f"host-{i}" for i in range(10)]
# What the agent of each host would serve, made once: hosts without one are refused by the NUMA filter.
SNAPSHOTS = {name: snapshot(name) for name in NAMES}


def ram_hosts(free_gb: dict[str, int], with_agent: set[str]) -> tuple[list[HostState], FixedSnapshots]:
    """Hosts weighed by their free memory alone (given in GB), an agent for those named."""
    snapshots = FixedSnapshots({name: SNAPSHOTS[name] for name in with_agent})
    resources = {
        name: {"resources": {"VCPU": (16, 0), "MEMORY_MB": (gb * 1024, 0), "DISK_GB": (500, 0)}}
        for name, gb in free_gb.items()
    }
    return make_hosts(resources, snapshots), snapshots


def by_ram(subset: int = 1) -> SelectionSettings:
    return SelectionSettings(weighers=("RAMWeigher",), host_subset_size=subset)


def lazily(hosts: list[HostState], settings: SelectionSettings, seed: int, filters: list[HostFilter] | None = None):
    filters = filters if filters is not None else [make_filter(NUMATopologyFilter)]
    return sorted_hosts(hosts, NUMA, filters, enabled_weighers(settings), settings, random.Random(seed))


def eagerly(hosts: list[HostState], settings: SelectionSettings, seed: int, filters: list[HostFilter] | None = None):
    """Every filter over every host, the survivors weighed, one of the best drawn: the order the
    scheduler gave before the agents were asked lazily."""
    filters = filters if filters is not None else [make_filter(NUMATopologyFilter)]
    rng = random.Random(seed)
    left, run = filter_hosts(hosts, NUMA, filters)
    ranked = [weighed.host for weighed in rank(left, NUMA, enabled_weighers(settings), settings, rng)]
    subset = ranked[: settings.host_subset_size]
    if len(subset) > 1:
        chosen = rng.choice(subset)
        ranked.remove(chosen)
        ranked.insert(0, chosen)
    return ranked, run


# Distinct weights far enough apart that no two hosts tie, so the draw is the only use of the rng.
cases = st.integers(1, len(NAMES)).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(1, 999), min_size=n, max_size=n, unique=True),
        st.lists(st.booleans(), min_size=n, max_size=n),
        st.integers(1, 4),
        st.integers(0, 2**32),
    )
)


@given(cases)
def test_the_lazy_order_is_the_eager_order(case):
    weights, passes, subset, seed = case
    free_gb = dict(zip(NAMES, weights, strict=False))
    with_agent = {name for name, passing in zip(NAMES, passes, strict=False) if passing}
    settings = by_ram(subset)

    eager, eager_run = eagerly(ram_hosts(free_gb, with_agent)[0], settings, seed)
    walked = lazily(ram_hosts(free_gb, with_agent)[0], settings, seed)
    assert [h.name for h in walked] == [h.name for h in eager]
    assert walked.ended
    assert walked.run.removed == eager_run.removed
    assert walked.run.hosts == eager_run.hosts

    # Taking the first host asks the agents of the best hosts down to the subset-th that passes.
    hosts, snapshots = ram_hosts(free_gb, with_agent)
    first = next(iter(lazily(hosts, settings, seed)), None)
    by_weight = sorted(free_gb, key=lambda name: -free_gb[name])
    passing_at = [index for index, name in enumerate(by_weight) if name in with_agent]
    reached = passing_at[subset - 1] + 1 if len(passing_at) >= subset else len(by_weight)
    assert snapshots.asked == by_weight[:reached]
    if first is None:
        assert not with_agent
    else:
        assert first.name in [by_weight[i] for i in passing_at[:subset]]


def test_the_best_host_passing_costs_one_snapshot():
    free_gb = {name: 100 - i for i, name in enumerate(NAMES)}
    hosts, snapshots = ram_hosts(free_gb, set(NAMES))
    ranked = lazily(hosts, by_ram(), seed=1)
    assert next(iter(ranked)).name == "host-0"
    assert snapshots.asked == ["host-0"]
    assert ranked.found == 1
    assert not ranked.ended
    assert ranked.run.removed == {}


def test_a_subset_checks_that_many_passing_hosts_before_the_first():
    free_gb = {name: 100 - i for i, name in enumerate(NAMES)}
    firsts = set()
    for seed in range(40):
        hosts, snapshots = ram_hosts(free_gb, set(NAMES) - {"host-1"})
        walk = iter(lazily(hosts, by_ram(subset=3), seed))
        first = next(walk).name
        assert snapshots.asked == ["host-0", "host-1", "host-2", "host-3"]
        firsts.add(first)
        rest = [next(walk).name for _ in range(3)]
        assert rest == [n for n in ("host-0", "host-2", "host-3") if n != first] + ["host-4"]
        assert snapshots.asked == ["host-0", "host-1", "host-2", "host-3", "host-4"]
    assert firsts == {"host-0", "host-2", "host-3"}


def test_walking_again_gives_the_same_hosts_without_asking_again():
    free_gb = {name: 100 - i for i, name in enumerate(NAMES[:5])}
    hosts, snapshots = ram_hosts(free_gb, {"host-1", "host-3", "host-4"})
    ranked = lazily(hosts, by_ram(subset=2), seed=7)
    first_walk = [h.name for h in ranked]
    asked = list(snapshots.asked)
    assert [h.name for h in ranked] == first_walk
    assert snapshots.asked == asked
    assert sorted(first_walk) == ["host-1", "host-3", "host-4"]


class _ListedRefusal(HostFilter):
    """A filter of the agent's kind refusing the hosts it lists, having read their snapshots."""

    needs_agent = True
    refused: ClassVar[frozenset[str]] = frozenset()

    def refusal(self, host: HostState, request: BuildRequest) -> str | None:
        host.snapshot()
        return f"{self.name} refuses it" if host.name in self.refused else None


class FirstAgentCheck(_ListedRefusal):
    name = "FirstAgentCheck"
    refused = frozenset({"host-1", "host-2"})


class SecondAgentCheck(_ListedRefusal):
    name = "SecondAgentCheck"
    refused = frozenset({"host-0", "host-1"})


def test_when_nothing_is_left_the_reasons_are_those_of_every_filter_over_every_host():
    # Ranked host-0 (refused by the second check) first, the call's order is the other way round.
    free_gb = {"host-2": 1, "host-1": 2, "host-0": 3}
    hosts, _ = ram_hosts(free_gb, set(free_gb))
    filters = [make_filter(FirstAgentCheck), make_filter(SecondAgentCheck)]
    walked = lazily(hosts, by_ram(), seed=3, filters=filters)
    assert list(walked) == []
    assert walked.found == 0
    _, eager_run = eagerly(ram_hosts(free_gb, set(free_gb))[0], by_ram(), seed=3, filters=filters)
    assert list(walked.run.removed) == ["FirstAgentCheck", "SecondAgentCheck"]
    assert walked.run.removed == eager_run.removed
    assert walked.run.removed["FirstAgentCheck"] == [
        ("host-2", "FirstAgentCheck refuses it"),
        ("host-1", "FirstAgentCheck refuses it"),
    ]


def test_the_agent_filters_run_after_the_others_whatever_their_place():
    class Disabled(HostFilter):
        name = "Disabled"

        def refusal(self, host: HostState, request: BuildRequest) -> str | None:
            return "disabled" if host.name == "host-0" else None

    free_gb = {"host-0": 3, "host-1": 2}
    hosts, snapshots = ram_hosts(free_gb, {"host-1"})
    ranked = lazily(hosts, by_ram(), seed=1, filters=[make_filter(NUMATopologyFilter), make_filter(Disabled)])
    assert [h.name for h in ranked] == ["host-1"]
    assert snapshots.asked == ["host-1"]
    assert ranked.run.counts() == {"Disabled": 1}
