"""Phase 6: pick and claim (``POST /berth/pick``) side by side with the client-side loop.

After the other phases and their verification, on the same cloud:

1. **weigh all**: sequential picks of one VCPU, which every host fits, timed alone: the service
   weighs every host for each (the answer's ``trees_fitted`` says how many);
2. ``pick_clients`` threads place servers of the claims phase's flavor with ``POST /berth/pick`` for
   ``pick_seconds``, then as many threads with the client-side loop (:mod:`.placing`) for as long;
3. the same two, placing the members of anti-affinity groups of ``group_size``, handed out in
   order so that the threads place members of one group at the same time;
4. the checks (:mod:`.placement_checks`): no over-commit on any provider either way placed on,
   usages equal to everything accepted, and anti-affinity as the service's allocations show it;
5. the servers' run of the pick again, with a quota on the benchmark's project whose limits are
   too high ever to refuse (``QUOTA_LIMITS``) and without it, in ``QUOTA_ROUNDS`` alternating pairs
   of rounds, each from the same emptied cloud: what checking quotas costs a pick. On a shared
   machine two runs minutes apart differ by more than the check costs, and a machine's pace drifts
   within the phase: each pair's two rounds, side by side, see the same load, and the cost is the
   median of the pairs' own;
6. the cost of a pick that preempts, beside one that does not (:mod:`.preempt_phase`);
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid as uuidlib
from typing import Any

from berth.testbed.bench import log
from berth.testbed.bench.cloud import BENCH_PROJECT
from berth.testbed.bench.phases.placement_checks import BASELINE, add_placements, check_anti_affinity, check_over_commit
from berth.testbed.bench.phases.placing import ClientSideClaimer, Picker, PlacementTally, release_consumers
from berth.testbed.bench.phases.preempt_phase import PREEMPT_HOSTS, measure_preemption
from berth.testbed.client import Client
from berth.testbed.parallel import Stop, parallel
from berth.testbed.report import percentile

WEIGH_ALL_WARMUPS = 3
WEIGH_ALL_PICKS = 50  # at most; fewer when --queries asks for fewer

Placer = Picker | ClientSideClaimer

# Limits on every class a server asks and on its consumers, far above what any cloud of the bench holds:
# every pick is checked against them and none is refused.
QUOTA_LIMITS = {"VCPU": 2**40, "MEMORY_MB": 2**50, "DISK_GB": 2**50, "consumers": 2**40}
# Pairs of rounds with and without the quota, the first of each pair alternating: blocks of four
# rounds (with, without, without, with), over which a rate drifting through the run cancels out.
QUOTA_ROUNDS = 6


class Members:
    """Hands out anti-affinity group members in order: ``size`` members of one group, then the next."""

    def __init__(self, size: int):
        self.size = size
        self.groups: list[str] = []
        self._next = 0
        self._lock = threading.Lock()

    def next_group(self) -> str:
        with self._lock:
            if self._next % self.size == 0:
                self.groups.append(str(uuidlib.uuid4()))
            self._next += 1
            return self.groups[-1]


def _ms(values: list[float], pct: int) -> float | None:
    return round(percentile(values, pct), 2) if values else None


def place_for(
    placer: Placer, clients: int, seconds: float, stop: Stop, members: Members | None = None
) -> tuple[PlacementTally, float]:
    """``clients`` threads placing with ``placer`` for ``seconds``; the merged tally and the time."""
    lock = threading.Lock()
    total = PlacementTally()
    deadline = time.monotonic() + seconds

    def worker(_: int) -> None:
        mine = PlacementTally()
        try:
            while time.monotonic() < deadline and not stop:
                full = mine.counts["no_valid_host"]
                placer.place(mine, members.next_group() if members else None)
                if mine.counts["no_valid_host"] > full and members is None:
                    time.sleep(0.05)  # the cloud is full
        finally:
            with lock:
                total.merge(mine)

    started = time.perf_counter()
    parallel(
        range(clients),
        clients,
        worker,
        stop,
        client=placer.client,
        progress=lambda _: log(f"  {placer.name}: {time.monotonic() - deadline + seconds:.0f}/{seconds:.0f} s"),
        name=placer.name,
    )
    return total, time.perf_counter() - started


def summary(tally: PlacementTally, elapsed: float) -> dict[str, Any]:
    return {
        **tally.counts,
        "seconds": round(elapsed, 2),
        "placements_per_s": round(tally.counts["placements"] / elapsed, 1),
        "p50_ms": _ms(tally.latency_ms, 50),
        "p99_ms": _ms(tally.latency_ms, 99),
        "requests_per_placement": round(tally.counts["requests"] / max(1, tally.counts["placements"]), 2),
        "conflict_codes": tally.conflict_codes,
        "error_samples": tally.errors,
    }


def weigh_all(client: Client, hosts: list[str], picks: int, stop: Stop) -> tuple[dict[str, Any], PlacementTally]:
    """Picks of one VCPU, which every host fits, one at a time: what weighing them all costs."""
    picker = Picker(client, set(hosts), resources="VCPU:1")
    tally = PlacementTally()
    for _ in range(WEIGH_ALL_WARMUPS):
        picker.place(tally)
    timed = PlacementTally()
    for _ in range(picks):
        if stop:
            raise KeyboardInterrupt
        picker.place(timed)
    tally.merge(timed)
    times = timed.latency_ms
    return {
        "picks": len(times),
        "median_ms": round(statistics.median(times), 2) if times else None,
        "p95_ms": _ms(times, 95),
        "trees_fitted": sorted({p.trees_fitted for p in timed.placed if p.trees_fitted is not None}),
        "failed": sum(tally.counts[k] for k in ("errors", "no_valid_host", "conflicts")),
    }, tally


class PickPhase:
    """The phase for one host count.  Each way of placing starts from the same cloud: the layout with
    ``baseline`` on it (what the preload left); the phase releases ``released`` (the consumers of the
    earlier phases, verified already) first, and each way's consumers once they are checked."""

    def __init__(
        self,
        client: Client,
        layout: dict[str, Any],
        baseline: dict[str, dict[str, int]],
        clients: int,
        seconds: float,
        group_size: int,
        threads: int,
        stop: Stop,
    ):
        self.client = client
        self.hosts = set(layout["hosts"])
        self.layout = layout
        self.baseline = baseline
        self.held: dict[str, dict[str, int]] = {}
        self.clients = clients
        self.seconds = seconds
        self.group_size = group_size
        self.threads = threads
        self.stop = stop
        self.consumers: list[str] = []  # those of the phase still holding allocations

    def release(self, consumers: list[str]) -> None:
        """Delete the allocations of ``consumers``; the books go back to the baseline."""
        release_consumers(self.client, consumers, self.threads, self.stop)
        gone = set(consumers)
        self.consumers = [c for c in self.consumers if c not in gone]
        self.held = {rp: dict(used) for rp, used in self.baseline.items()}

    def _run(self, placer: Placer, members: Members | None) -> tuple[dict[str, Any], PlacementTally]:
        what = f"anti-affinity groups of {members.size}" if members else "servers"
        log(f"  {placer.name}: {self.clients} clients placing {what} for {self.seconds:g} s")
        tally, elapsed = place_for(placer, self.clients, self.seconds, self.stop, members)
        add_placements(self.held, tally.placed)
        self.consumers += [p.consumer for p in tally.placed]
        result = summary(tally, elapsed)
        log(
            f"  {placer.name}: {result['placements']} placements ({result['placements_per_s']}/s), "
            f"p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms, {result['conflicts']} conflicts, "
            f"{result['no_valid_host']} found no host, {result['errors']} errors"
        )
        for sample in tally.errors:
            log(f"  ERROR {sample}")
        return result, tally

    def approach(self, plain: Placer, grouped: Placer) -> dict[str, Any]:
        """Servers, then anti-affinity groups, with one way of placing; then the checks."""
        result, tally = self._run(plain, None)
        members = Members(self.group_size)
        grouped_result, grouped_tally = self._run(grouped, members)
        result["clients"] = self.clients
        result["anti_affinity"] = {
            "group_size": self.group_size,
            "groups": len(members.groups),
            **{k: grouped_result[k] for k in ("placements", "placements_per_s", "p50_ms", "p99_ms")},
            **{k: grouped_result[k] for k in ("conflicts", "no_valid_host", "errors")},
        }
        self.check(result, tally, grouped_tally, grouped.name)
        return result

    def check(self, result: dict[str, Any], tally: PlacementTally, grouped: PlacementTally, placer: str) -> None:
        """Over-commit on every provider placed on, then anti-affinity as ``placer`` kept it, into ``result``."""
        providers = {rp for p in tally.placed + grouped.placed for rp in p.allocations}
        log(f"  checking {len(providers)} providers and {len(grouped.placed)} group members")
        books = check_over_commit(self.client, providers, self.held, self.threads, self.stop)
        spread = check_anti_affinity(self.client, grouped.placed, self.hosts, self.threads, self.stop, placer)
        result["violations"] = books["violations"]
        result["usage_mismatches"] = books["usage_mismatches"]
        result["providers_checked"] = books["providers_checked"]
        result["anti_affinity_violations"] = spread["violations"]
        result["over_commit_samples"] = books["violation_samples"]
        result["anti_affinity_samples"] = spread["violation_samples"]
        broken = "anti-affinity breaks of the baseline (a figure)" if placer == BASELINE else "anti-affinity violations"
        log(
            f"  {placer}: {books['violations']} over-commits, {books['usage_mismatches']} usage mismatches, "
            f"{spread['violations']} {broken}"
        )

    def with_quota(self) -> dict[str, Any]:
        """The servers' run of the pick under ``QUOTA_LIMITS`` on the benchmark's project and
        without, in alternating rounds, the cloud released after each pair; the medians' cost."""
        path = f"/berth/quotas/{BENCH_PROJECT}"
        rates: dict[bool, list[float]] = {True: [], False: []}
        rounds: list[dict[str, Any]] = []
        for pair in range(QUOTA_ROUNDS):
            for quota in (True, False) if pair % 2 == 0 else (False, True):
                if quota:
                    self.client.call("PUT", path, {"limits": QUOTA_LIMITS})
                name = "pick_with_quota" if quota else "pick_without_quota"
                try:
                    result, tally = self._run(Picker(self.client, self.hosts, name=name), None)
                finally:
                    if quota:
                        self.client.call("DELETE", path, expect=(204,))
                providers = {rp for p in tally.placed for rp in p.allocations}
                books = check_over_commit(self.client, providers, self.held, self.threads, self.stop)
                rates[quota].append(result["placements_per_s"])
                rounds.append({"quota": quota, **self._quota_figures(result, books)})
                self.release(self.consumers)
        with_quota = [r for r in rounds if r["quota"]]
        figures: dict[str, Any] = {
            "rounds": rounds,
            "limits": QUOTA_LIMITS,
            "placements_per_s": round(statistics.median(rates[True]), 1),
            "without_placements_per_s": round(statistics.median(rates[False]), 1),
            "p50_ms": statistics.median(r["p50_ms"] for r in with_quota if r["p50_ms"] is not None),
            "p99_ms": max(r["p99_ms"] for r in with_quota if r["p99_ms"] is not None),
        }
        for key in ("placements", "conflicts", "no_valid_host", "errors", "violations", "usage_mismatches"):
            figures[key] = sum(r[key] for r in rounds)
        figures["conflict_codes"] = {code: n for r in rounds for code, n in r["conflict_codes"].items()}
        figures["error_samples"] = [sample for r in rounds for sample in r["error_samples"]]
        # What the quota check costs: the rate with it over all its rounds against the rate without,
        # over as many rounds as long, in blocks that cancel a drift of the machine's speed (a pair's
        # own cost moves by 20 points from one to the next). Each pair's and each block's for the record.
        pairs = list(zip(rates[True], rates[False], strict=True))
        figures["pair_cost_percents"] = [round(100 * (1 - on / off), 1) for on, off in pairs if off]
        blocks = [pairs[start : start + 2] for start in range(0, len(pairs) - 1, 2)]
        figures["block_cost_percents"] = [_cost_percent(block) for block in blocks]
        figures["cost_percent"] = _cost_percent(pairs)
        return figures

    @staticmethod
    def _quota_figures(result: dict[str, Any], books: dict[str, Any]) -> dict[str, Any]:
        keys = ("placements", "placements_per_s", "p50_ms", "p99_ms", "conflicts", "conflict_codes", "no_valid_host")
        figures = {key: result[key] for key in (*keys, "errors", "error_samples")}
        figures.update(violations=books["violations"], usage_mismatches=books["usage_mismatches"])
        return figures

    def run(self, released: list[str], weigh_all_picks: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """The figures of pick and claim and of the client-side loop."""
        self.release(released)
        log(f"  weighing all hosts: {weigh_all_picks} picks one at a time")
        weighed, weigh_tally = weigh_all(self.client, self.layout["hosts"], weigh_all_picks, self.stop)
        self.consumers += [p.consumer for p in weigh_tally.placed]
        log(f"  weighing all hosts: median {weighed['median_ms']} ms, p95 {weighed['p95_ms']} ms")
        self.release(self.consumers)
        picked = self.approach(Picker(self.client, self.hosts), Picker(self.client, self.hosts))
        self.release(self.consumers)
        quota = self.with_quota()
        preemption = measure_preemption(self.client, sorted(self.hosts), PREEMPT_HOSTS, self.threads, self.stop)
        log(
            f"  pick with a quota: {quota['placements_per_s']}/s against {quota['without_placements_per_s']}/s "
            f"without (medians of {QUOTA_ROUNDS} alternating rounds each): {quota['cost_percent']} % fewer "
            f"over all of them (blocks of four rounds: {quota['block_cost_percents']}; "
            f"pairs: {quota['pair_cost_percents']})"
        )
        client_side = self.approach(
            ClientSideClaimer(self.client, self.hosts), ClientSideClaimer(self.client, self.hosts)
        )
        picked["weigh_all_median_ms"] = weighed["median_ms"]
        picked["weigh_all_p95_ms"] = weighed["p95_ms"]
        picked["weigh_all"] = weighed
        picked["with_quota"] = quota
        picked["preemption"] = preemption
        return picked, client_side


def _cost_percent(pairs: list[tuple[float, float]]) -> float | None:
    """How many fewer placements per second, in percent, the rounds with the quota had than those
    without, over the pairs' rounds together."""
    without = sum(off for _, off in pairs)
    return round(100 * (1 - sum(on for on, _ in pairs) / without), 1) if without else None
