"""The hosts one instance may go to, best first: the filters, then the weighers.

Hosts whose allocation requests no longer fit what this call's earlier instances left are removed
first (Placement offered them before those were placed). Each filter that applies to the request
and reads only what Placement answered then runs on the hosts still in the running, in the
configured order. The survivors are weighed (no weigher reads an agent's snapshot), and the filters
that ask the agents (``needs_agent``) run last, whatever their place in the configuration: on one
host at a time, best first, only as far as the caller walks the ranking (``RankedHosts``). With a
``host_subset_size`` above 1, one of that many best hosts that pass, drawn at random, goes first.

The weights are normalised over the hosts the other filters leave, since which hosts the agents
would refuse is not known before they are asked.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Final

from berth.scheduler.explain import FilterRun
from berth.scheduler.filters.base import HostFilter
from berth.scheduler.hosts.host_state import HostState
from berth.scheduler.hosts.ranked import RankedHosts
from berth.scheduler.request.build_request import BuildRequest
from berth.scheduler.settings import SelectionSettings
from berth.scheduler.weighers.base import HostWeigher
from berth.scheduler.weighers.ranking import rank

# How FilterRun names the hosts this call's earlier instances filled.
ROOM_LEFT: Final = "RoomLeft"


def filter_hosts(
    hosts: Sequence[HostState], request: BuildRequest, filters: Sequence[HostFilter]
) -> tuple[list[HostState], FilterRun]:
    """The hosts with room left that pass ``filters`` (those that apply), and what removed the others."""
    run = FilterRun(len(hosts))
    left = []
    for host in hosts:
        if next(host.open_requests(), None) is None:
            run.record(ROOM_LEFT, host.name, "this request's earlier instances took the room Placement offered")
        else:
            left.append(host)
    for host_filter in filters:
        if not host_filter.applies(request):
            continue
        kept = []
        for host in left:
            reason = host_filter.refusal(host, request)
            if reason is None:
                kept.append(host)
            else:
                run.record(host_filter.name, host.name, reason)
        left = kept
    return left, run


def sorted_hosts(
    hosts: Sequence[HostState],
    request: BuildRequest,
    filters: Sequence[HostFilter],
    weighers: Sequence[HostWeigher],
    settings: SelectionSettings,
    rng: random.Random,
) -> RankedHosts:
    """The hosts that pass, best first, checked by the agents' filters as far as they are walked;
    its ``run`` says what the filters removed."""
    left, run = filter_hosts(hosts, request, [f for f in filters if not f.needs_agent])
    ranked = [weighed.host for weighed in rank(left, request, weighers, settings, rng)]
    agent_filters = [f for f in filters if f.needs_agent and f.applies(request)]
    return RankedHosts(
        ranked,
        agent_filters,
        request,
        run,
        subset_size=settings.host_subset_size,
        rng=rng,
        call_order=[host.name for host in hosts],
    )
