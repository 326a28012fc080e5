"""Hosts in order of preference: every enabled weigher's normalised value times its multiplier,
summed (``berth.domain.weighing``), best first, hosts of equal weight in random order."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from berth.domain.weighing import best_first, normalise
from berth.scheduler.hosts.host_state import HostState
from berth.scheduler.request.build_request import BuildRequest
from berth.scheduler.settings import SelectionSettings
from berth.scheduler.weighers.base import HostWeigher


@dataclass(frozen=True)
class WeighedHost:
    host: HostState
    weight: float


def rank(
    hosts: Sequence[HostState],
    request: BuildRequest,
    weighers: Sequence[HostWeigher],
    settings: SelectionSettings,
    rng: random.Random,
) -> list[WeighedHost]:
    """``hosts`` best first."""
    facts = [host.facts() for host in hosts]
    multipliers = settings.base_multipliers
    weights = [0.0] * len(hosts)
    if len(hosts) > 1:
        for weigher in weighers:
            values = normalise([weigher.raw(f, request) for f in facts])
            for index, value in enumerate(values):
                if value:
                    weights[index] += weigher.multiplier(hosts[index], multipliers, settings.aggregate_metadata) * value
    return [WeighedHost(hosts[i], weights[i]) for i in best_first(weights, rng.shuffle)]
