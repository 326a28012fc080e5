"""The invariants a simulation ends with, checked on the books as read (``Books``) against what the
run believes (``Expected``). Pure: the unit tests hand it books that break each invariant.

- ``over_capacity``: no provider's usage above its capacity, ``(total - reserved) * ratio``;
- ``usage_mismatch``: every provider's usage is the sum of the allocations against it;
- ``instance_allocations``: a live instance holds exactly its flavor's resources, all on its host
  (its tree and the shared disk pool it uses);
- ``migration_allocations``: a move in flight has its migration consumer hold the old flavor's
  resources on the source; a migration whose move ended holds nothing;
- ``gone_allocations``: a deleted or offloaded instance holds nothing;
- ``claims_mismatch``: on every host's own providers, each consumer holds what the agent's persisted
  claims say, and none holds anything there without a claim;
- ``anti_affinity``: no two live members of an anti-affinity group on one host;
- ``preempted_gone``: a server a preempting build's pick removed, once the conductors ended it
  (deleted or offloaded), holds nothing in the service and no claim on any host;
- ``quota``: with a VCPU limit on the run's project, the VCPUs its instances hold at the end are
  within it (a move in flight's migration consumer left out).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

Amounts = dict[str, int]  # resource class -> amount
ProviderAmounts = dict[str, Amounts]  # provider uuid -> class -> amount


@dataclass(frozen=True)
class Provider:
    uuid: str
    name: str
    # Resource class -> (total - reserved) * allocation_ratio, rounded down as the service does.
    capacity: Amounts
    usages: Amounts


@dataclass
class Books:
    providers: dict[str, Provider]
    # Consumer -> provider -> class -> amount, as the providers' allocations list them.
    allocations: dict[str, ProviderAmounts]
    # Host -> its own providers (its tree); host -> the sharing providers it uses.
    trees: dict[str, set[str]]
    shared: dict[str, set[str]]
    # Host -> consumer -> provider -> class -> amount, summed over the agent's persisted claims.
    claims: dict[str, dict[str, ProviderAmounts]]


@dataclass(frozen=True)
class LiveInstance:
    host: str
    resources: Amounts
    # The move in flight: its migration consumer, the source host and the old flavor's resources.
    migration: str | None = None
    source: str | None = None
    old_resources: Amounts = field(default_factory=dict)


@dataclass
class Expected:
    live: dict[str, LiveInstance]
    gone: set[str]
    ended_migrations: set[str]
    anti_affinity: dict[str, list[str]]
    # The victims of preemption whose servers the conductors ended, and those left running
    # without allocations (which the conductors should have ended).
    preempted: set[str] = field(default_factory=set)
    preempted_running: set[str] = field(default_factory=set)
    # The run's project's VCPU limit (every consumer of the run is the project's), if any.
    vcpu_limit: int | None = None


@dataclass(frozen=True)
class Violation:
    invariant: str
    consumer: str | None
    provider: str | None
    detail: str

    def to_dict(self) -> dict[str, str | None]:
        return {
            "invariant": self.invariant,
            "consumer": self.consumer,
            "provider": self.provider,
            "detail": self.detail,
        }


@dataclass
class Verdict:
    checks: Counter[str] = field(default_factory=Counter)
    violations: list[Violation] = field(default_factory=list)

    def check(self, invariant: str, holds: bool, consumer: str | None, provider: str | None, detail: str) -> None:
        self.checks[invariant] += 1
        if not holds:
            self.violations.append(Violation(invariant, consumer, provider, detail))


def check(books: Books, expected: Expected) -> Verdict:
    verdict = Verdict()
    _providers(books, verdict)
    _instances(books, expected, verdict)
    _migrations(books, expected, verdict)
    for consumer in sorted(expected.gone):
        held = books.allocations.get(consumer, {})
        verdict.check("gone_allocations", not held, consumer, _first(held), f"holds {held}")
    _claims(books, verdict)
    _anti_affinity(books, expected, verdict)
    _preempted(books, expected, verdict)
    _quota(books, expected, verdict)
    return verdict


def summed(allocations: ProviderAmounts, providers: Iterable[str] | None = None) -> Amounts:
    """The amounts by class, over ``providers`` (default: all)."""
    keep = None if providers is None else set(providers)
    total: Counter[str] = Counter()
    for rp, amounts in allocations.items():
        if keep is None or rp in keep:
            total.update(amounts)
    return {rc: n for rc, n in total.items() if n}


def _first(allocations: ProviderAmounts) -> str | None:
    return min(allocations) if allocations else None


def _providers(books: Books, verdict: Verdict) -> None:
    against: dict[str, Counter[str]] = {}
    for held in books.allocations.values():
        for rp, amounts in held.items():
            against.setdefault(rp, Counter()).update(amounts)
    for rp, provider in sorted(books.providers.items()):
        for rc, used in sorted(provider.usages.items()):
            room = provider.capacity.get(rc, 0)
            verdict.check("over_capacity", used <= room, None, rp, f"{provider.name} {rc}: {used} used of {room}")
        sums = {rc: n for rc, n in against.get(rp, Counter()).items() if n}
        usages = {rc: n for rc, n in provider.usages.items() if n}
        verdict.check(
            "usage_mismatch", usages == sums, None, rp, f"{provider.name}: usages {usages}, allocations {sums}"
        )


def _host_of(books: Books, held: ProviderAmounts) -> set[str]:
    return {host for host, tree in books.trees.items() if tree & set(held)}


def _instances(books: Books, expected: Expected, verdict: Verdict) -> None:
    for consumer, instance in sorted(expected.live.items()):
        held = books.allocations.get(consumer, {})
        allowed = books.trees.get(instance.host, set()) | books.shared.get(instance.host, set())
        outside = sorted(set(held) - allowed)
        ok = summed(held) == instance.resources and not outside
        verdict.check(
            "instance_allocations",
            ok,
            consumer,
            outside[0] if outside else _first(held),
            f"on {instance.host}: expected {instance.resources}, holds {summed(held)}"
            + (f", outside its host on {outside}" if outside else ""),
        )


def _migrations(books: Books, expected: Expected, verdict: Verdict) -> None:
    for instance in expected.live.values():
        if instance.migration is None or instance.source is None:
            continue
        held = books.allocations.get(instance.migration, {})
        on_source = books.trees.get(instance.source, set()) | books.shared.get(instance.source, set())
        outside = sorted(set(held) - on_source)
        # The disk of a pool both hosts use stays with the instance: compare what the source's tree holds.
        tree = books.trees.get(instance.source, set())
        old_on_tree = {
            rc: n for rc, n in instance.old_resources.items() if rc != "DISK_GB" or not _pooled(books, instance.source)
        }
        ok = not outside and summed(held, tree) == old_on_tree
        verdict.check(
            "migration_allocations",
            ok,
            instance.migration,
            outside[0] if outside else _first(held),
            f"move from {instance.source}: expected {old_on_tree}, holds {summed(held)}",
        )
    for migration in sorted(expected.ended_migrations):
        held = books.allocations.get(migration, {})
        verdict.check("migration_allocations", not held, migration, _first(held), f"ended, holds {held}")


def _pooled(books: Books, host: str) -> bool:
    return bool(books.shared.get(host))


def _claims(books: Books, verdict: Verdict) -> None:
    for host, tree in sorted(books.trees.items()):
        claimed = books.claims.get(host, {})
        consumers = set(claimed) | {c for c, held in books.allocations.items() if tree & set(held)}
        for consumer in sorted(consumers):
            held = {rp: a for rp, a in books.allocations.get(consumer, {}).items() if rp in tree}
            claim = {rp: a for rp, a in claimed.get(consumer, {}).items() if rp in tree}
            verdict.check(
                "claims_mismatch",
                _clean(held) == _clean(claim),
                consumer,
                _first(held) or _first(claim),
                f"on {host}: the service holds {_clean(held)}, the agent's claims {_clean(claim)}",
            )


def _clean(allocations: ProviderAmounts) -> ProviderAmounts:
    return {rp: {rc: n for rc, n in a.items() if n} for rp, a in allocations.items() if any(a.values())}


def _anti_affinity(books: Books, expected: Expected, verdict: Verdict) -> None:
    for group, members in sorted(expected.anti_affinity.items()):
        seen: dict[str, str] = {}
        for member in members:
            if member not in expected.live:
                continue
            for host in _host_of(books, books.allocations.get(member, {})):
                other = seen.get(host)
                verdict.check(
                    "anti_affinity",
                    other is None,
                    member,
                    None,
                    f"group {group}: on {host} with {other}",
                )
                seen.setdefault(host, member)


def _preempted(books: Books, expected: Expected, verdict: Verdict) -> None:
    for victim in sorted(expected.preempted):
        held = books.allocations.get(victim, {})
        claimed = sorted(host for host, claims in books.claims.items() if victim in claims)
        verdict.check(
            "preempted_gone",
            not held and not claimed,
            victim,
            _first(held),
            f"ended, yet the service holds {held} and the agents of {claimed} claim it",
        )
    for victim in sorted(expected.preempted_running):
        verdict.check("preempted_gone", False, victim, None, "preempted, and its server still runs")


def _quota(books: Books, expected: Expected, verdict: Verdict) -> None:
    limit = expected.vcpu_limit
    if limit is None:
        return
    # The instances' holdings: a move in flight holds its instance's size twice (the migration
    # consumer the source's) until it is confirmed or reverted, and a migration is never refused by
    # the quota for that (docs/pick-and-claim.md, "Moves and quotas").
    moving = {instance.migration for instance in expected.live.values() if instance.migration}
    vcpus = sum(
        a.get("VCPU", 0)
        for consumer, by_provider in books.allocations.items()
        if consumer not in moving
        for a in by_provider.values()
    )
    verdict.check("quota", vcpus <= limit, None, None, f"the run's project holds {vcpus} VCPUs, its limit is {limit}")
