"""The hosts that pass every filter, best first, with the filters that ask the agents run only on
the hosts a caller reaches.

The filters that read only what Placement answered have run on every host and the survivors are
ranked already; the filters that read the agent's snapshot (``needs_agent``) then check one host
at a time in that order, as the caller walks it. A claim that succeeds on the best host therefore
costs one snapshot, not one per host. With ``host_subset_size`` N above 1, the first host is drawn
among the N best hosts that pass, so up to N hosts are checked before it comes; the others follow
in their order. The walk is remembered: walking again yields the same hosts in the same order.

The ``FilterRun`` is filled as hosts are checked. Once the walk has reached the end, every host has
been checked by every filter, and the run is put in the order a run of every filter over every host
gives: the filters in the configured order, each filter's hosts in the call's order.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from berth.scheduler.explain import FilterRun
from berth.scheduler.filters.base import HostFilter
from berth.scheduler.hosts.host_state import HostState
from berth.scheduler.request.build_request import BuildRequest


class RankedHosts:
    """Hosts passing every filter, best first, found as far as they are walked."""

    def __init__(
        self,
        ranked: Sequence[HostState],
        agent_filters: Sequence[HostFilter],
        request: BuildRequest,
        run: FilterRun,
        *,
        subset_size: int,
        rng: random.Random,
        call_order: Sequence[str],
    ):
        """``ranked``: the hosts the other filters left, best first; ``agent_filters``: those that
        apply to ``request``, in their order; ``call_order``: the names of the call's hosts in its
        order (that of the run's records once the walk has ended)."""
        self.run = run
        self._unchecked = iter(ranked)
        self._agent_filters = list(agent_filters)
        self._request = request
        self._subset_size = subset_size
        self._rng = rng
        self._call_order = call_order
        self._passed: list[HostState] = []
        self._drawn = False
        self._ended = False

    def __iter__(self) -> Iterator[HostState]:
        index = 0
        while index < len(self._passed) or self._find_more():
            yield self._passed[index]
            index += 1

    @property
    def found(self) -> int:
        """How many hosts that pass have been found so far."""
        return len(self._passed)

    @property
    def ended(self) -> bool:
        """Whether every host has been checked (the run is then complete)."""
        return self._ended

    def _find_more(self) -> bool:
        """Find the next host that passes (the first: the draw among the subset); False at the end."""
        before = len(self._passed)
        if self._drawn:
            self._next_passing()
        else:
            self._draw()
        return len(self._passed) > before

    def _draw(self) -> None:
        self._drawn = True
        while len(self._passed) < self._subset_size and self._next_passing():
            pass
        if len(self._passed) > 1:
            chosen = self._rng.choice(self._passed)
            self._passed.remove(chosen)
            self._passed.insert(0, chosen)

    def _next_passing(self) -> bool:
        """Check hosts in rank order until one passes (kept in ``_passed``); False at the end."""
        for host in self._unchecked:
            if self._passes(host):
                self._passed.append(host)
                return True
        if not self._ended:
            self._ended = True
            self._order_run()
        return False

    def _passes(self, host: HostState) -> bool:
        for agent_filter in self._agent_filters:
            reason = agent_filter.refusal(host, self._request)
            if reason is not None:
                self.run.record(agent_filter.name, host.name, reason)
                return False
        return True

    def _order_run(self) -> None:
        position = {name: index for index, name in enumerate(self._call_order)}
        for agent_filter in self._agent_filters:
            removed = self.run.removed.pop(agent_filter.name, None)
            if removed:
                self.run.removed[agent_filter.name] = sorted(removed, key=lambda r: position.get(r[0], len(position)))
