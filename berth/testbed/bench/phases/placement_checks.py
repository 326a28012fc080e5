"""The checks after the pick-and-claim phase, read back from the service: no provider over-committed
(and its usages equal to every claim it accepted), and no two members of an anti-affinity group on
one host."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable
from typing import Any

from berth.testbed.bench import log
from berth.testbed.bench.phases.claims import verify_capacity
from berth.testbed.bench.phases.placing import ClientSideClaimer, Placement
from berth.testbed.client import Client
from berth.testbed.parallel import Stop, parallel


def add_usage(held: dict[str, dict[str, int]], taken: dict[str, dict[str, int]]) -> None:
    """Add ``taken`` to ``held`` (both provider -> class -> amount)."""
    for rp, resources in taken.items():
        used = held.setdefault(rp, {})
        for rc, amount in resources.items():
            used[rc] = used.get(rc, 0) + amount


def add_placements(held: dict[str, dict[str, int]], placements: Iterable[Placement]) -> None:
    """Add what ``placements`` took to ``held``."""
    for placement in placements:
        add_usage(held, placement.allocations)


def check_over_commit(
    client: Client, providers: Collection[str], held: dict[str, dict[str, int]], threads: int, stop: Stop
) -> dict[str, Any]:
    """Usages within capacity (``berth.domain.capacity``) on ``providers``, and equal to ``held``."""
    return verify_capacity(client, held, threads, stop, providers=providers, label="OVER-COMMIT")


# The client-side loop's name (placing.ClientSideClaimer): the naive baseline the picks are measured
# against, which keeps anti-affinity only as far as its own threads learn of each other's claims.
BASELINE = ClientSideClaimer.name


def anti_affinity_lines(placer: str, samples: list[dict[str, Any]]) -> list[str]:
    """The log lines for groups with members on one host: a failure of ``placer``, or, for the
    baseline, one of its figures (berth bench's exit status counts only the picks')."""
    if placer == BASELINE:
        return [
            f"  baseline (client-side loop) put group members on one host, as expected of it: {sample}"
            for sample in samples
        ]
    return [f"  ANTI-AFFINITY VIOLATION by {placer}: {sample}" for sample in samples]


def check_anti_affinity(
    client: Client, members: list[Placement], hosts: Collection[str], threads: int, stop: Stop, placer: str
) -> dict[str, Any]:
    """Where the service holds each member's allocations, as ``placer`` placed them; a violation for
    every member on a host that already has one of its group (so a group of 10 on 9 hosts counts 1)."""

    def host_of(member: Placement) -> tuple[str | None, str]:
        allocations = client.call("GET", f"/allocations/{member.consumer}")["allocations"]
        return member.group, next((rp for rp in allocations if rp in hosts), "none")

    where = parallel(members, threads, host_of, stop, client=client)
    per_host = Counter(where)
    violations = sum(n - 1 for n in per_host.values())
    samples = [{"group": group, "host": host, "members": n} for (group, host), n in per_host.items() if n > 1]
    for line in anti_affinity_lines(placer, samples[:5]):
        log(line)
    return {
        "members_checked": len(where),
        "groups_checked": len({group for group, _ in where}),
        "violations": violations,
        "violation_samples": samples[:10],
    }
