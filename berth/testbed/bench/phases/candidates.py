"""Phase 2: the latency of ``GET /allocation_candidates`` in five variants and the six worst ones
(:mod:`.worst_queries`), and whether each returns what the layout allows."""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from berth.testbed.bench import log
from berth.testbed.bench.cloud import AVX2_TRAIT, FAST_TRAIT, sharing_host_count
from berth.testbed.bench.phases.worst_queries import (
    check_worst_variant,
    worst_expected_counts,
    worst_layout_sets,
    worst_queries,
)
from berth.testbed.client import Client
from berth.testbed.parallel import Stop
from berth.testbed.report import percentile

WARMUPS = 5
# The timed requests of each variant are taken in this many rounds, every variant in each.
ROUNDS = 10
# berth serve generates at most this many candidates per request unless told otherwise
# (--max-candidates / $BERTH_MAX_CANDIDATES); a bench against --url assumes the default.
DEFAULT_MAX_CANDIDATES = 1000

VARIANTS = {
    "basic": "resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20&limit=50",
    "traits": f"resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20&limit=50&required={AVX2_TRAIT}",
    "granular_nested": "resources=VCPU:2,MEMORY_MB:4096&resources_GPU=VGPU:1&group_policy=isolate&limit=50",
    "forbidden_agg_sharing": f"resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20&required=!{FAST_TRAIT}&limit=50",
    "unlimited": "resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20",
}


def server_max_candidates() -> int:
    """The server's cap on candidates per request (``berth serve --max-candidates``), as inherited."""
    try:
        return int(os.environ.get("BERTH_MAX_CANDIDATES", DEFAULT_MAX_CANDIDATES))
    except ValueError:
        return DEFAULT_MAX_CANDIDATES


def expected_counts(hosts: int, cap: int) -> dict[str, int]:
    """Allocation requests each variant should return on the untouched layout.

    ``cap`` is the server's own limit on candidates per request, which also bounds "unlimited".
    """
    even = (hosts + 1) // 2
    odd = hosts // 2
    sharing_hosts = sharing_host_count(hosts)
    gpu_hosts = (hosts + 4) // 5
    # A host in a sharing aggregate has two ways to get its disk: its own or the shared one.
    return {
        "basic": min(50, hosts + sharing_hosts),
        "traits": min(50, even),
        "granular_nested": min(50, gpu_hosts),
        "forbidden_agg_sharing": min(50, odd + sharing_hosts),
        "unlimited": min(cap, hosts + sharing_hosts),
    }


def check_variant(name: str, body: dict[str, Any], layout_sets: dict[str, set[str]]) -> str | None:
    """A sanity check of what each variant returned; a message when something looks wrong."""
    if name not in VARIANTS:
        return check_worst_variant(name, body, layout_sets)
    for request in body.get("allocation_requests", []):
        providers = set(request["allocations"])
        roots = providers & layout_sets["hosts"]
        if name in ("traits", "forbidden_agg_sharing"):
            fast = bool(roots & layout_sets["fast"])
            if (name == "traits") != fast:
                return f"{name}: an allocation request uses host(s) {sorted(roots)} against the trait filter"
        if name == "granular_nested":
            gpus = [rp for rp, a in request["allocations"].items() if "VGPU" in a["resources"]]
            if len(gpus) != 1 or gpus[0] not in layout_sets["gpus"]:
                return f"{name}: allocation request without exactly one VGPU child: {request}"
    return None


def _first_answer_checks(name: str, body: dict[str, Any], layout_sets: dict[str, set[str]], problems: list[str]) -> int:
    """Check the first answer of a variant; how many of its requests use a sharing provider."""
    problem = check_variant(name, body, layout_sets)
    if problem:
        problems.append(problem)
    return sum(1 for req in body["allocation_requests"] if set(req["allocations"]) & layout_sets["sharing"])


class VariantTiming:
    """The timed requests of one variant, taken a few at a time (``take``) between those of the
    others, and what they answered."""

    def __init__(self, name: str, query: str, expected: int, layout_sets: dict[str, set[str]]):
        self.name = name
        self.query = query
        self.path = f"/allocation_candidates?{query}"
        self.expected = expected
        self.layout_sets = layout_sets
        self.times: list[float] = []
        self.counts: set[int] = set()
        self.problems: list[str] = []
        self.errors = 0
        self.sharing_used = 0

    def warm_up(self, client: Client, stop: Stop) -> None:
        """``WARMUPS`` untimed requests; the first answer checked against the layout."""
        for n in range(WARMUPS):
            body = self._send(client, stop)[0]
            if n == 0 and body is not None:
                self.sharing_used = _first_answer_checks(self.name, body, self.layout_sets, self.problems)

    def take(self, client: Client, queries: int, stop: Stop) -> None:
        """``queries`` timed requests."""
        for _ in range(queries):
            body, elapsed = self._send(client, stop)
            if body is not None:
                self.times.append(elapsed * 1000)
                self.counts.add(len(body["allocation_requests"]))

    def _send(self, client: Client, stop: Stop) -> tuple[dict[str, Any] | None, float]:
        if stop:
            raise KeyboardInterrupt
        t0 = time.perf_counter()
        r = client.get(self.path)
        elapsed = time.perf_counter() - t0
        if r.status_code == 200:
            return r.json(), elapsed
        self.errors += 1
        if len(self.problems) < 3:
            self.problems.append(f"HTTP {r.status_code}: {r.text[:300]}")
        return None, elapsed

    def entry(self) -> dict[str, Any]:
        times, counts = self.times, self.counts
        problems = list(self.problems)
        if counts and counts != {self.expected}:
            problems.append(f"{self.name}: returned {sorted(counts)} allocation requests, expected {self.expected}")
        return {
            "query": self.query,
            "queries": len(times),
            "errors": self.errors,
            "median_ms": round(statistics.median(times), 2) if times else None,
            "p95_ms": round(percentile(times, 95), 2) if times else None,
            "allocation_requests": sorted(counts)[0] if len(counts) == 1 else sorted(counts),
            "expected_allocation_requests": self.expected,
            "requests_using_sharing_provider": self.sharing_used,
            "problems": problems,
        }


def rounds_of(queries: int, rounds: int = ROUNDS) -> list[int]:
    """``queries`` split into at most ``rounds`` rounds as even as can be."""
    rounds = max(1, min(rounds, queries))
    return [queries // rounds + (1 if n < queries % rounds else 0) for n in range(rounds)]


def measure_candidates(
    client: Client, queries: int, hosts: int, layout: dict[str, Any], cap: int, stop: Stop
) -> dict[str, dict[str, Any]]:
    """Every variant's latency, the variants taken in turn, round after round; the worst ones need the
    wide trees of :mod:`.wide_trees` built first."""
    layout_sets = {
        "hosts": set(layout["hosts"]),
        "fast": {u for i, u in enumerate(layout["hosts"]) if i % 2 == 0},
        "gpus": set(layout["gpus"]),
        "sharing": set(layout["sharing"]),
        **worst_layout_sets(layout),
    }
    expected = {**expected_counts(hosts, cap), **worst_expected_counts(hosts, cap)}
    queries_by_name = {**VARIANTS, **worst_queries(layout)}
    timings = [VariantTiming(name, query, expected[name], layout_sets) for name, query in queries_by_name.items()]
    for timing in timings:
        timing.warm_up(client, stop)
    # Every variant a few requests at a time, in turn: a stretch of the server's own background work
    # (a worker reading the cloud just built into its board takes a quarter of a second at 10,000
    # hosts) then falls on all of them alike instead of on whichever variant it met.
    for share in rounds_of(queries):
        for timing in timings:
            timing.take(client, share, stop)
    results = {}
    for timing in timings:
        entry = results[timing.name] = timing.entry()
        for problem in entry["problems"]:
            log(f"  WARNING {problem}")
        log(
            f"  {timing.name}: median {entry['median_ms']} ms, p95 {entry['p95_ms']} ms, "
            f"{entry['allocation_requests']} allocation requests"
        )
    return results
