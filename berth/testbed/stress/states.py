"""The state of a consumer as the audit compares it: a sorted tuple of (provider, class, amount),
() when it holds nothing."""

from __future__ import annotations

from collections import Counter
from typing import Any

State = tuple[tuple[str, str, int], ...]


def freeze(allocations: dict[str, Any]) -> State:
    items = []
    for rp, entry in allocations.items():
        resources = entry.get("resources", entry) if isinstance(entry, dict) else {}
        for rc, amount in resources.items():
            if amount:
                items.append((rp, rc, int(amount)))
    return tuple(sorted(items))


def thaw(state: State) -> dict[str, dict[str, dict[str, int]]]:
    out: dict[str, dict[str, dict[str, int]]] = {}
    for rp, rc, amount in state:
        out.setdefault(rp, {"resources": {}})["resources"][rc] = amount
    return out


def totals(state: State) -> dict[str, int]:
    out: Counter[str] = Counter()
    for _, rc, amount in state:
        out[rc] += amount
    return dict(out)


def show(state: State | None) -> str:
    if state is None:
        return "?"
    if not state:
        return "(none)"
    return ", ".join(f"{rp[:8]}:{rc}={n}" for rp, rc, n in state)
