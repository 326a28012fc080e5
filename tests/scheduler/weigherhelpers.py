"""Ranking hosts with chosen weighers, for the weighers' unit tests."""

from __future__ import annotations

import random

from hosthelpers import request
from schedulerhelpers import spec

from berth.scheduler.settings import SelectionSettings
from berth.scheduler.weighers.ranking import rank


def ranked(hosts, weighers, build=None, **settings):
    """(name, weight) of each host, best first."""
    weighed = rank(hosts, build or request(spec()), weighers, SelectionSettings(**settings), random.Random(7))
    return [(w.host.name, round(w.weight, 6)) for w in weighed]


def names(hosts, weighers, build=None, **settings):
    return [name for name, _ in ranked(hosts, weighers, build, **settings)]
