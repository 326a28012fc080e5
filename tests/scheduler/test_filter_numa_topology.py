"""NUMATopologyFilter: the agent's own fitting, run on its snapshot, decides; what this call placed
on the host before counts."""

from __future__ import annotations

from hosthelpers import FixedSnapshots, make_filter, make_host, request, snapshot
from schedulerhelpers import flavor, spec

from berth.domain.host.fitting import Plan
from berth.domain.host.snapshot import fits
from berth.scheduler.filters.numa_topology import NUMATopologyFilter
from berth.scheduler.hosts.snapshots import AgentSnapshots

# Two cells of 4 CPUs and 8 GB (TOPOLOGY); CPUs 2-3 and 6-7 pinned.
PINNED = {"cpu_dedicated_set": "2-3,6-7"}


def _request(extra_specs, **flavor_fields):
    return request(spec(flavor_=flavor(extra_specs, **flavor_fields)))


def _host(**config):
    snapshots = FixedSnapshots({"numa": snapshot("numa", **config)})
    return make_host("numa", snapshots), snapshots


def test_a_guest_that_fits_a_cell_passes_and_one_that_fits_none_is_refused_with_the_agents_reasons():
    check = make_filter(NUMATopologyFilter)
    host, _ = _host(**PINNED)
    two = _request({"hw:cpu_policy": "dedicated"}, vcpus=2)
    assert check.applies(two)
    assert check.host_passes(host, two)
    three = _request({"hw:cpu_policy": "dedicated"}, vcpus=3)
    assert check.refusal(host, three) == (
        "NUMA cell 0: 2 free dedicated CPUs, 3 asked; NUMA cell 1: 2 free dedicated CPUs, 3 asked"
    )


def test_the_memory_of_each_cell_counts():
    check = make_filter(NUMATopologyFilter)
    host, _ = _host()
    assert check.host_passes(host, _request({"hw:numa_nodes": "1"}, vcpus=2, memory_mb=8192))
    assert not check.host_passes(host, _request({"hw:numa_nodes": "1"}, vcpus=2, memory_mb=10240))
    # Split over both cells, 10 GB fits.
    assert check.host_passes(host, _request({"hw:numa_nodes": "2"}, vcpus=2, memory_mb=10240))


class _Agent:
    def __init__(self, taken):
        self.taken = taken
        self.asked = 0

    def host_snapshot(self):
        self.asked += 1
        return self.taken


def test_what_the_call_placed_before_is_counted():
    check = make_filter(NUMATopologyFilter)
    agent = _Agent(snapshot("numa", **PINNED))
    host = make_host("numa", AgentSnapshots({"numa": agent}))
    build = _request({"hw:cpu_policy": "dedicated"}, vcpus=2)
    for _ in range(2):
        assert check.host_passes(host, build)
        plan = host.fit(build.spec.host_request)
        assert isinstance(plan, Plan)
        host.consume(host.requests[0], "instance", plan, member=False)
    # As the agent would say: its compute node has no pinned CPU left.
    assert check.refusal(host, build) == "PCPU on numa: 2 requested, 0 of 4 free"
    # The agent was asked once: the placements are counted on the snapshot read first.
    assert agent.asked == 1


def test_it_agrees_with_fits_on_the_snapshot():
    check = make_filter(NUMATopologyFilter)
    host, _ = _host()
    for vcpus, cells in ((2, "1"), (4, "1"), (6, "1"), (6, "2"), (8, "2"), (10, "2")):
        build = _request({"hw:numa_nodes": cells}, vcpus=vcpus, memory_mb=2048)
        assert check.host_passes(host, build) is isinstance(fits(snapshot("numa"), build.spec.host_request), Plan)


def test_a_host_without_an_agent_is_refused():
    check = make_filter(NUMATopologyFilter)
    assert check.refusal(make_host("elsewhere"), request(spec({"hw:numa_nodes": "1"}))) == (
        "no agent is known for this host"
    )


def test_a_guest_without_a_topology_is_not_filtered():
    assert not make_filter(NUMATopologyFilter).applies(request(spec()))
