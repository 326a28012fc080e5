"""Phases 3 and 4: threads claiming as a scheduler would, then the check that the books add up."""

from __future__ import annotations

import random
import statistics
import threading
import time
import uuid as uuidlib
from collections.abc import Collection
from typing import Any

from berth.domain.capacity import capacity
from berth.testbed.bench import log
from berth.testbed.bench.cloud import BENCH_PROJECT, BENCH_USER
from berth.testbed.client import Client, RequestFailed, Response, error_code
from berth.testbed.parallel import Stop, parallel
from berth.testbed.report import percentile

CLAIM_QUERY = "resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20&limit=10"
ERROR_SAMPLES = 5


def _add(into: dict[str, dict[str, int]], rp: str, resources: dict[str, int]) -> None:
    used = into.setdefault(rp, {})
    for rc, amount in resources.items():
        used[rc] = used.get(rc, 0) + amount


class ClaimTally:
    """What one claiming thread saw; the threads' tallies are merged at the end."""

    def __init__(self) -> None:
        self.counts = {"claims": 0, "conflicts": 0, "errors": 0, "no_candidates": 0}
        self.conflict_codes: dict[str, int] = {}
        self.errors: list[str] = []
        self.claimed: dict[str, dict[str, int]] = {}
        self.consumers: list[str] = []
        self.put_ms: list[float] = []
        self.get_ms: list[float] = []

    def error(self, message: str) -> None:
        self.counts["errors"] += 1
        self.errors.append(message)

    def answer(self, r: Response, consumer: str, choice: dict[str, Any]) -> None:
        """Count the answer to the claim of ``consumer`` on ``choice``."""
        if r.status_code == 204:
            self.counts["claims"] += 1
            self.consumers.append(consumer)
            for rp, allocation in choice.items():
                _add(self.claimed, rp, allocation["resources"])
        elif r.status_code == 409:
            self.counts["conflicts"] += 1
            code = error_code(r) or "?"
            self.conflict_codes[code] = self.conflict_codes.get(code, 0) + 1
        else:
            self.error(f"PUT /allocations/{consumer} -> HTTP {r.status_code}: {r.text[:300]}")

    def merge(self, other: ClaimTally) -> None:
        for key, value in other.counts.items():
            self.counts[key] += value
        for code, n in other.conflict_codes.items():
            self.conflict_codes[code] = self.conflict_codes.get(code, 0) + n
        for rp, used in other.claimed.items():
            _add(self.claimed, rp, used)
        self.consumers.extend(other.consumers)
        self.put_ms.extend(other.put_ms)
        self.get_ms.extend(other.get_ms)
        self.errors.extend(other.errors[: max(0, ERROR_SAMPLES - len(self.errors))])


def claim_once(client: Client, rng: random.Random, tally: ClaimTally) -> None:
    """One round of a claiming thread: ask for candidates, claim one of them."""
    t0 = time.perf_counter()
    r = client.get(f"/allocation_candidates?{CLAIM_QUERY}")
    tally.get_ms.append((time.perf_counter() - t0) * 1000)
    if r.status_code != 200:
        tally.error(f"GET /allocation_candidates -> HTTP {r.status_code}: {r.text[:300]}")
        return
    candidates = r.json()["allocation_requests"]
    if not candidates:
        tally.counts["no_candidates"] += 1  # the cloud is full
        time.sleep(0.05)
        return
    choice = rng.choice(candidates)["allocations"]
    consumer = str(uuidlib.uuid4())
    body = {
        "allocations": choice,
        "project_id": BENCH_PROJECT,
        "user_id": BENCH_USER,
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
    }
    t0 = time.perf_counter()
    r = client.request("PUT", f"/allocations/{consumer}", body)
    tally.put_ms.append((time.perf_counter() - t0) * 1000)
    tally.answer(r, consumer, choice)


def run_claims(client: Client, clients: int, seconds: float, stop: Stop) -> dict[str, Any]:
    lock = threading.Lock()
    total = ClaimTally()
    deadline = time.monotonic() + seconds

    def claimer(_: int) -> None:
        rng = random.Random()
        mine = ClaimTally()
        try:
            while time.monotonic() < deadline and not stop:
                try:
                    claim_once(client, rng, mine)
                except RequestFailed as e:
                    if stop:
                        return
                    mine.error(f"request failed: {e}")
        finally:
            with lock:
                total.merge(mine)

    started = time.perf_counter()
    parallel(
        range(clients),
        clients,
        claimer,
        stop,
        client=client,
        progress=lambda _: log(f"  claiming: {time.monotonic() - deadline + seconds:.0f}/{seconds:.0f} s"),
        name="claim",
    )
    elapsed = time.perf_counter() - started
    for sample in total.errors:
        log(f"  ERROR {sample}")
    return {
        **total.counts,
        "seconds": round(elapsed, 2),
        "claims_per_second": total.counts["claims"] / elapsed,
        "conflict_codes": total.conflict_codes,
        "error_samples": total.errors,
        "candidates_median_ms": round(statistics.median(total.get_ms), 2) if total.get_ms else None,
        "put_median_ms": round(statistics.median(total.put_ms), 2) if total.put_ms else None,
        "put_p95_ms": round(percentile(total.put_ms, 95), 2) if total.put_ms else None,
        "providers_claimed": len(total.claimed),
        "_claimed": total.claimed,
        "_consumers": total.consumers,
    }


def check_provider(
    client: Client, rp: str, expected: dict[str, int]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Over-commit of one provider, and where its usages differ from ``expected``."""
    usages = client.call("GET", f"/resource_providers/{rp}/usages")["usages"]
    inventories = client.call("GET", f"/resource_providers/{rp}/inventories")["inventories"]
    violations: list[dict[str, Any]] = []
    mismatches: list[dict[str, Any]] = []
    for rc, used in usages.items():
        inv = inventories.get(rc)
        limit = capacity(inv["total"], inv["reserved"], inv["allocation_ratio"]) if inv else 0
        if used > limit:
            violations.append({"provider": rp, "resource_class": rc, "used": used, "capacity": limit})
    for rc in set(usages) | set(expected):
        if usages.get(rc, 0) != expected.get(rc, 0):
            mismatches.append(
                {
                    "provider": rp,
                    "resource_class": rc,
                    "server_used": usages.get(rc, 0),
                    "accepted_claims": expected.get(rc, 0),
                }
            )
    return violations, mismatches


def verify_capacity(
    client: Client,
    claimed: dict[str, dict[str, int]],
    threads: int,
    stop: Stop,
    *,
    providers: Collection[str] | None = None,
    label: str = "VIOLATION",
) -> dict[str, Any]:
    """No over-commit on ``providers`` (default: those that received claims), checked with
    ``berth.domain.capacity``; their usages equal the accepted claims in ``claimed``."""
    names = sorted(claimed if providers is None else providers)
    checked = parallel(
        names,
        threads,
        lambda rp: check_provider(client, rp, claimed.get(rp, {})),
        stop,
        client=client,
        progress=lambda done: log(f"  providers verified: {done}/{len(names)}"),
    )
    violations = [v for vs, _ in checked for v in vs]
    mismatches = [m for _, ms in checked for m in ms]
    for v in violations[:5]:
        log(f"  {label} {v}")
    for m in mismatches[:5]:
        log(f"  MISMATCH {m}")
    return {
        "providers_checked": len(checked),
        "violations": len(violations),
        "usage_mismatches": len(mismatches),
        "violation_samples": violations[:20],
        "mismatch_samples": mismatches[:20],
    }
