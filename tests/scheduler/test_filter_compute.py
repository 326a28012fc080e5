"""ComputeFilter: a host whose compute node carries COMPUTE_STATUS_DISABLED takes nothing."""

from __future__ import annotations

from hosthelpers import make_filter, make_host, request
from schedulerhelpers import CONFIG, spec

from berth.scheduler.filters.compute import ComputeFilter
from berth.scheduler.request.flavor import SchedulerConfig

UNEXCLUDED = SchedulerConfig(pci_aliases=CONFIG.pci_aliases, exclude_disabled_hosts=False)


def test_a_disabled_host_is_refused_and_an_enabled_one_passes():
    check = make_filter(ComputeFilter, UNEXCLUDED)
    build = request(spec(config=UNEXCLUDED))
    assert check.applies(build)
    disabled = make_host(traits=["COMPUTE_NODE", "COMPUTE_STATUS_DISABLED"])
    assert not check.host_passes(disabled, build)
    assert check.refusal(disabled, build) == "disabled (COMPUTE_STATUS_DISABLED)"
    assert check.host_passes(make_host(traits=["COMPUTE_NODE"]), build)


def test_nothing_to_do_when_the_query_forbids_the_trait_already():
    build = request(spec())
    assert ("root_required", "!COMPUTE_STATUS_DISABLED") in build.spec.candidates_query()
    assert not make_filter(ComputeFilter).applies(build)


def test_a_host_whose_agent_is_down_is_refused_and_the_pick_still_suits_while_the_trait_is_forbidden():
    from berth.scheduler.picking import pick_suits
    from berth.scheduler.settings import SelectionSettings

    down = {"host-b"}
    config = SchedulerConfig(pci_aliases=CONFIG.pci_aliases, hosts_down=down)
    check = make_filter(ComputeFilter, config)
    build = request(spec(config=config))
    assert check.applies(build)
    assert check.refusal(make_host("host-b", traits=["COMPUTE_NODE"]), build) == "down: its agent stopped beating"
    assert check.host_passes(make_host("host-a", traits=["COMPUTE_NODE"]), build)
    # The pick avoids the hosts down (the selector names their trees in its body).
    assert pick_suits(build, [check], SelectionSettings())
    down.clear()  # the collection is the conductors' live view: the host beats again
    assert not check.applies(build)
    assert pick_suits(build, [check], SelectionSettings())
    # A query that lets disabled hosts in leaves them to this filter, on the Placement API's path.
    down.add("host-b")
    letting_in = SchedulerConfig(pci_aliases=CONFIG.pci_aliases, hosts_down=down, exclude_disabled_hosts=False)
    unforbidden = request(spec(config=letting_in))
    assert make_filter(ComputeFilter, letting_in).applies(unforbidden)
    assert not pick_suits(unforbidden, [make_filter(ComputeFilter, letting_in)], SelectionSettings())
