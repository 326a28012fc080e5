"""Phase 2: the latency of ``GET /allocation_candidates`` in five variants and the six worst ones
(:mod:`.worst_queries`), and whether each returns what the layout allows."""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from berth.testbed.bench import log
from berth.testbed.bench.cloud import AVX2_TRAIT, FAST_TRAIT, sharing_host_count
from berth.testbed.bench.worst_queries import (
    check_worst_variant,
    worst_expected_counts,
    worst_layout_sets,
    worst_queries,
)
from berth.testbed.client import Client
from berth.testbed.parallel import Stop
from berth.testbed.report import percentile

WARMUPS = 5
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


def measure_variant(
    client: Client,
    name: str,
    queries: int,
    expected: int,
    layout_sets: dict[str, set[str]],
    stop: Stop,
    query: str | None = None,
) -> dict[str, Any]:
    """``WARMUPS`` untimed then ``queries`` timed requests of one variant (``query``, by default the
    variant's own)."""
    query = query or VARIANTS[name]
    path = f"/allocation_candidates?{query}"
    times: list[float] = []
    counts: set[int] = set()
    problems: list[str] = []
    errors = sharing_used = 0
    for n in range(WARMUPS + queries):
        if stop:
            raise KeyboardInterrupt
        t0 = time.perf_counter()
        r = client.get(path)
        elapsed = time.perf_counter() - t0
        if r.status_code != 200:
            errors += 1
            if len(problems) < 3:
                problems.append(f"HTTP {r.status_code}: {r.text[:300]}")
        elif n == 0:
            sharing_used = _first_answer_checks(name, r.json(), layout_sets, problems)
        elif n >= WARMUPS:
            times.append(elapsed * 1000)
            counts.add(len(r.json()["allocation_requests"]))
    entry = {
        "query": query,
        "queries": len(times),
        "errors": errors,
        "median_ms": round(statistics.median(times), 2) if times else None,
        "p95_ms": round(percentile(times, 95), 2) if times else None,
        "allocation_requests": sorted(counts)[0] if len(counts) == 1 else sorted(counts),
        "expected_allocation_requests": expected,
        "requests_using_sharing_provider": sharing_used,
        "problems": problems,
    }
    if counts and counts != {expected}:
        problems.append(f"{name}: returned {sorted(counts)} allocation requests, expected {expected}")
    return entry


def measure_candidates(
    client: Client, queries: int, hosts: int, layout: dict[str, Any], cap: int, stop: Stop
) -> dict[str, dict[str, Any]]:
    """Every variant in turn; the worst ones need the wide trees of :mod:`.wide_trees` built first."""
    layout_sets = {
        "hosts": set(layout["hosts"]),
        "fast": {u for i, u in enumerate(layout["hosts"]) if i % 2 == 0},
        "gpus": set(layout["gpus"]),
        "sharing": set(layout["sharing"]),
        **worst_layout_sets(layout),
    }
    expected = {**expected_counts(hosts, cap), **worst_expected_counts(hosts, cap)}
    queries_by_name = {**VARIANTS, **worst_queries(layout)}
    results = {}
    for name, query in queries_by_name.items():
        entry = results[name] = measure_variant(client, name, queries, expected[name], layout_sets, stop, query)
        for problem in entry["problems"]:
            log(f"  WARNING {problem}")
        log(
            f"  {name}: median {entry['median_ms']} ms, p95 {entry['p95_ms']} ms, "
            f"{entry['allocation_requests']} allocation requests"
        )
    return results
