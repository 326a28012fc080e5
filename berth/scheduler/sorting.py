"""The hosts one instance may go to, best first: the filters, then the weighers.

Hosts whose allocation requests no longer fit what this call's earlier instances left are removed
first (Placement offered them before those were placed). Each filter that applies to the request
then runs on the hosts still in the running, in the configured order, so that the filters that ask
the agents run on as few hosts as the others leave. The survivors are weighed; with a
``host_subset_size`` above 1, one of that many best hosts, drawn at random, goes first.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Final

from berth.scheduler.build_request import BuildRequest
from berth.scheduler.explain import FilterRun
from berth.scheduler.filters.base import HostFilter
from berth.scheduler.host_state import HostState
from berth.scheduler.settings import SelectionSettings
from berth.scheduler.weighers.base import HostWeigher
from berth.scheduler.weighers.ranking import rank

# How FilterRun names the hosts this call's earlier instances filled.
ROOM_LEFT: Final = "RoomLeft"


def filter_hosts(
    hosts: Sequence[HostState], request: BuildRequest, filters: Sequence[HostFilter]
) -> tuple[list[HostState], FilterRun]:
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
) -> tuple[list[HostState], FilterRun]:
    """The hosts that pass, best first, and what the filters removed."""
    left, run = filter_hosts(hosts, request, filters)
    ranked = [weighed.host for weighed in rank(left, request, weighers, settings, rng)]
    subset = ranked[: settings.host_subset_size]
    if len(subset) > 1:
        chosen = rng.choice(subset)
        ranked.remove(chosen)
        ranked.insert(0, chosen)
    return ranked, run
