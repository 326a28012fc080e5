"""Why no host was found: ``NoValidHost``, and the counts its message is made of.

Each time the filters run (once per instance), ``FilterRun`` records which filter removed which
host and why. When nothing is left for an instance, ``NoValidHost`` says how many hosts Placement
offered, which filter removed how many (with each host's reason), which claims the service refused,
and, when Placement offered nothing, the service's own count of what each condition of the query
excluded (``GET /berth/allocation_candidates/explain``, when the service has it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from berth.scheduler.errors import SchedulerError

# Hosts named per filter in a message; the rest are counted.
_NAMED_HOSTS = 5


@dataclass
class FilterRun:
    """One run of the filters: the hosts it started with and what each filter removed."""

    hosts: int
    removed: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def record(self, filter_name: str, host: str, reason: str) -> None:
        self.removed.setdefault(filter_name, []).append((host, reason))

    def counts(self) -> dict[str, int]:
        return {name: len(hosts) for name, hosts in self.removed.items()}

    def describe(self) -> str:
        parts = []
        for name, hosts in self.removed.items():
            named = "; ".join(f"{host}: {reason}" for host, reason in hosts[:_NAMED_HOSTS])
            more = f"; and {len(hosts) - _NAMED_HOSTS} more" if len(hosts) > _NAMED_HOSTS else ""
            parts.append(f"{name} removed {len(hosts)} ({named}{more})")
        return ", ".join(parts) if parts else "no filter removed any"


class NoValidHost(SchedulerError):
    """No host could be found (or claimed) for an instance; nothing stays claimed for the request.

    ``filter_counts`` maps each filter to how many hosts it removed for the instance that failed;
    ``candidates`` is how many hosts Placement offered; ``explain`` the service's report when
    Placement offered none (None without the extension); ``refused_claims`` the hosts whose claim
    the service refused.
    """

    def __init__(
        self,
        message: str,
        *,
        candidates: int,
        filter_counts: Mapping[str, int] | None = None,
        explain: Mapping[str, Any] | None = None,
        refused_claims: Sequence[str] = (),
    ):
        super().__init__(message)
        self.candidates = candidates
        self.filter_counts = dict(filter_counts or {})
        self.explain = explain
        self.refused_claims = list(refused_claims)


def nothing_offered(explain: Mapping[str, Any] | None) -> NoValidHost:
    """Placement had no candidate at all."""
    message = "No valid host: Placement found no allocation candidates for the request"
    if explain is not None:
        message += f"; the service's count: {describe_explain(explain)}"
    return NoValidHost(message, candidates=0, explain=explain)


def nothing_left(
    placing: str, position: str, hosts: int, run: FilterRun, refused: Sequence[str], outcome: str
) -> NoValidHost:
    """Placement offered hosts, but the filters removed them all or every claim was refused;
    ``placing`` names what was being placed (``BuildRequest.consumer_name``)."""
    message = f"No valid host for {placing} ({position}): of {hosts} hosts Placement offered, {run.describe()}"
    if refused:
        message += f"; the service refused the claims on {', '.join(refused)}"
    message += f"; {outcome}"
    return NoValidHost(message, candidates=hosts, filter_counts=run.counts(), refused_claims=refused)


def describe_explain(report: Mapping[str, Any]) -> str:
    """The conditions that excluded providers, as the service counted them."""
    parts = []
    for group in report.get("groups") or ():
        label = f"group {group['suffix']!r}" if group.get("suffix") else "the unsuffixed group"
        parts += [_condition(label, c) for c in group.get("conditions") or () if c.get("excluded")]
    parts += [_condition("the root", c) for c in report.get("root") or () if c.get("excluded")]
    total = report.get("providers")
    head = f"{total} providers" if total is not None else "the providers"
    return head + (": " + "; ".join(parts) if parts else ": no single condition excluded any")


def _condition(label: str, condition: Mapping[str, Any]) -> str:
    return f"{label}: {condition['excluded']} excluded by '{condition['condition']}' ({condition['remaining']} left)"
