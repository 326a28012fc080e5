"""The audit after the load: every provider's capacity and usages, and every consumer's two views."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Protocol

from berth.domain.capacity import capacity
from berth.testbed.parallel import Stop, parallel
from berth.testbed.stress.states import State, freeze, show

AUDIT_THREADS = 4
ABSENT_SAMPLE = 100  # consumers that should hold nothing, read back one by one at the end


class Reader(Protocol):
    def get_retrying(self, path: str) -> Any: ...


def violation(kind: str, detail: str, **extra: Any) -> dict[str, Any]:
    return {"what": kind, "detail": detail, **extra}


def check_provider(
    name: str, rp: str, inventories: dict[str, Any], usages: dict[str, int], summed: Counter[str]
) -> list[dict[str, Any]]:
    """Usages against the sum of the provider's allocations, and against its capacity."""
    violations = []
    for rc in sorted(set(usages) | set(summed) | set(inventories)):
        used = usages.get(rc, 0)
        if used != summed.get(rc, 0):
            violations.append(
                violation(
                    "usage mismatch",
                    f"{name} ({rp}) {rc}: usages say {used}, its allocations sum to {summed.get(rc, 0)}",
                )
            )
        inv = inventories.get(rc)
        if inv is None:
            if used:
                violations.append(violation("usage without inventory", f"{name} ({rp}) {rc}: {used} used"))
            continue
        limit = capacity(inv["total"], inv["reserved"], inv["allocation_ratio"])
        if used > limit:
            violations.append(
                violation(
                    "over capacity",
                    f"{name} ({rp}) {rc}: used {used} > (total {inv['total']} - reserved "
                    f"{inv['reserved']}) * ratio {inv['allocation_ratio']} = {limit:g}",
                )
            )
    return violations


def audit_providers(api: Reader, layout: dict[str, Any]) -> tuple[dict[str, State], list[dict[str, Any]]]:
    """Capacity and usage checks; returns (consumer -> state from the providers' lists, violations)."""
    violations: list[dict[str, Any]] = []
    holdings: dict[str, list[tuple[str, str, int]]] = {}

    def read(rp: str) -> tuple[str, Any, Any, Any]:
        return (
            rp,
            api.get_retrying(f"/resource_providers/{rp}/inventories")["inventories"],
            api.get_retrying(f"/resource_providers/{rp}/usages")["usages"],
            api.get_retrying(f"/resource_providers/{rp}/allocations")["allocations"],
        )

    for rp, inventories, usages, listed in parallel(layout["all"], AUDIT_THREADS, read, Stop()):
        summed: Counter[str] = Counter()
        for consumer, entry in listed.items():
            for rc, amount in entry["resources"].items():
                summed[rc] += amount
                holdings.setdefault(consumer, []).append((rp, rc, amount))
        violations += check_provider(layout["names"][rp], rp, inventories, usages, summed)
    return {c: tuple(sorted(items)) for c, items in holdings.items()}, violations


def audit_consumers(api: Reader, actual: dict[str, State], known: set[str], rng: random.Random) -> list[dict[str, Any]]:
    """``GET /allocations/{consumer}`` must agree with the providers' lists: for every holder, and a
    sample of the consumers that should hold nothing (refused creates, deletes, moves away)."""
    violations = [
        violation("unknown consumer", f"consumer {consumer} holds [{show(actual[consumer])}] but no claimer wrote it")
        for consumer in sorted(set(actual) - known)
    ]
    empty = sorted(known - set(actual))
    sample = sorted(actual) + rng.sample(empty, min(len(empty), ABSENT_SAMPLE))
    views = parallel(sample, AUDIT_THREADS, lambda c: (c, api.get_retrying(f"/allocations/{c}")), Stop())
    for consumer, body in views:
        state = freeze(body.get("allocations", {}))
        if state != actual.get(consumer, ()):
            violations.append(
                violation(
                    "consumer view differs from provider view",
                    f"GET /allocations/{consumer} says [{show(state)}], the providers' lists say "
                    f"[{show(actual.get(consumer, ()))}]",
                )
            )
    return violations
