"""Allocation sets, as Placement and the claims write them: provider uuid -> resource class -> amount.

Amounts of zero and providers with nothing left are dropped wherever sets are compared, so that
``{rp: {"VCPU": 0}}`` and ``{}`` are the same set.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

Allocations = dict[str, dict[str, int]]


def parse(data: Mapping[str, Mapping[str, Any]] | None) -> Allocations:
    """An allocation set from JSON (amounts as whole numbers, zeros dropped)."""
    return {rp: {rc: int(n) for rc, n in res.items() if n} for rp, res in (data or {}).items() if res}


def clean(allocations: Mapping[str, Mapping[str, int]]) -> Allocations:
    """The same set without zero amounts and empty providers."""
    return {rp: {rc: n for rc, n in res.items() if n} for rp, res in allocations.items() if any(res.values())}


def on(allocations: Mapping[str, Mapping[str, int]], providers: Collection[str]) -> Allocations:
    """The part of the set on ``providers``."""
    return {rp: dict(res) for rp, res in allocations.items() if rp in providers}


def outside(allocations: Mapping[str, Mapping[str, int]], providers: Collection[str]) -> Allocations:
    """The part of the set on providers other than ``providers``."""
    return {rp: dict(res) for rp, res in allocations.items() if rp not in providers}


def total(sets: Iterable[Mapping[str, Mapping[str, int]]]) -> Allocations:
    """The sum of several sets, provider by provider and class by class."""
    summed: Allocations = {}
    for allocations in sets:
        for rp, res in allocations.items():
            into = summed.setdefault(rp, {})
            for rc, n in res.items():
                into[rc] = into.get(rc, 0) + n
    return clean(summed)


def contains(allocations: Mapping[str, Mapping[str, int]], part: Mapping[str, Mapping[str, int]]) -> bool:
    """Whether every amount of ``part`` is in ``allocations``, exactly."""
    return all(allocations.get(rp, {}).get(rc) == n for rp, res in part.items() for rc, n in res.items())


def missing(want: Mapping[str, Mapping[str, int]], have: Mapping[str, Mapping[str, int]]) -> Allocations:
    """What ``want`` holds beyond ``have``, class by class (what ``have`` holds beyond ``want`` is not counted)."""
    beyond = {rp: {rc: n - have.get(rp, {}).get(rc, 0) for rc, n in res.items()} for rp, res in want.items()}
    return clean({rp: {rc: n for rc, n in res.items() if n > 0} for rp, res in beyond.items()})


def grows(have: Mapping[str, Mapping[str, int]], want: Mapping[str, Mapping[str, int]]) -> bool:
    """Whether going from ``have`` to ``want`` takes more of some class somewhere."""
    return bool(missing(want, have))


# consumer uuid -> its allocation set (on the providers that were read)
ByConsumer = dict[str, Allocations]
