"""The two ways of placing a server that the pick-and-claim phase compares, one placement at a time.

- :class:`Picker`: one ``POST /berth/pick``; the service weighs every host that fits and claims the
  best in the same transaction (docs/pick-and-claim.md).
- :class:`ClientSideClaimer`: today's scheduler loop: ``GET /allocation_candidates`` with a limit,
  the candidates in random order, ``PUT /allocations/{consumer}`` (consumer generation null) of the
  first, and on a 409 the next one; a new query when none is left.

For an anti-affinity group the picker names the group and lets the service keep the policy; the
client-side claimer skips the hosts its own threads already placed a member of the group on (what a
scheduler's database would tell it), which is all a client can do, so members placed at the same
moment may land together.
"""

from __future__ import annotations

import random
import threading
import time
import uuid as uuidlib
from collections.abc import Collection
from typing import Any

from berth.domain import error_codes
from berth.testbed.bench import log
from berth.testbed.bench.cloud import BENCH_PROJECT, BENCH_USER
from berth.testbed.client import Client, Response, error_code
from berth.testbed.parallel import Stop, parallel

FLAVOR_RESOURCES = "VCPU:2,MEMORY_MB:4096,DISK_GB:20"
CLIENT_SIDE_LIMIT = 50
CLIENT_SIDE_QUERIES = 5  # candidate queries a client-side placement makes before it gives up
FULL_PAUSE = 0.05  # seconds a thread waits after finding the cloud full
ERROR_SAMPLES = 5

Allocations = dict[str, dict[str, int]]  # provider uuid -> resource class -> amount


class Placement:
    """A consumer placed: its allocations, the host they are on and, for a pick, how many hosts fitted."""

    __slots__ = ("consumer", "allocations", "host", "group", "trees_fitted")

    def __init__(
        self, consumer: str, allocations: Allocations, host: str, group: str | None, trees_fitted: int | None = None
    ):
        self.consumer = consumer
        self.allocations = allocations
        self.host = host
        self.group = group
        self.trees_fitted = trees_fitted


class PlacementTally:
    """What one thread saw; the threads' tallies are merged at the end."""

    def __init__(self) -> None:
        self.counts = {"placements": 0, "conflicts": 0, "no_valid_host": 0, "errors": 0, "requests": 0}
        self.conflict_codes: dict[str, int] = {}
        self.errors: list[str] = []
        self.latency_ms: list[float] = []
        self.placed: list[Placement] = []

    def error(self, message: str) -> None:
        self.counts["errors"] += 1
        if len(self.errors) < ERROR_SAMPLES:
            self.errors.append(message)

    def conflict(self, r: Response) -> None:
        self.counts["conflicts"] += 1
        code = error_code(r) or "?"
        self.conflict_codes[code] = self.conflict_codes.get(code, 0) + 1

    def place(self, placement: Placement, started: float) -> None:
        self.counts["placements"] += 1
        self.latency_ms.append((time.perf_counter() - started) * 1000)
        self.placed.append(placement)

    def merge(self, other: PlacementTally) -> None:
        for key, value in other.counts.items():
            self.counts[key] += value
        for code, n in other.conflict_codes.items():
            self.conflict_codes[code] = self.conflict_codes.get(code, 0) + n
        self.errors.extend(other.errors[: max(0, ERROR_SAMPLES - len(self.errors))])
        self.latency_ms.extend(other.latency_ms)
        self.placed.extend(other.placed)


class GroupHosts:
    """The hosts each anti-affinity group has members on, as the placing threads learn them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hosts: dict[str, set[str]] = {}

    def of(self, group: str) -> set[str]:
        with self._lock:
            return set(self._hosts.get(group, ()))

    def add(self, group: str, host: str) -> None:
        with self._lock:
            self._hosts.setdefault(group, set()).add(host)


def release_consumers(client: Client, consumers: list[str], threads: int, stop: Stop) -> None:
    """Delete the allocations of ``consumers`` (a phase's own, when it ends)."""
    if consumers:
        log(f"  releasing {len(consumers)} consumers")
        parallel(
            [f"/allocations/{c}" for c in consumers],
            threads,
            lambda path: client.call("DELETE", path, expect=(204, 404)),
            stop,
            client=client,
        )


def _host_of(allocations: Allocations, hosts: Collection[str]) -> str:
    return next((rp for rp in allocations if rp in hosts), "?")


class Picker:
    """Places with ``POST /berth/pick``."""

    name = "pick_and_claim"

    def __init__(
        self, client: Client, hosts: Collection[str], resources: str = FLAVOR_RESOURCES, name: str | None = None
    ):
        self.client = client
        self.hosts = hosts
        self.resources = resources
        if name is not None:
            self.name = name

    def place(self, tally: PlacementTally, group: str | None = None) -> bool:
        """One pick; whether it placed the consumer (False also when nothing fits any more)."""
        consumer = str(uuidlib.uuid4())
        body: dict[str, Any] = {
            "query": {"resources": self.resources},
            "consumer": {
                "uuid": consumer,
                "project_id": BENCH_PROJECT,
                "user_id": BENCH_USER,
                "consumer_type": "INSTANCE",
            },
        }
        if group is not None:
            body["server_group"] = {"uuid": group, "policy": "anti-affinity"}
        started = time.perf_counter()
        r = self.client.request("POST", "/berth/pick", body)
        tally.counts["requests"] += 1
        if r.status_code == 200:
            answer = r.json()
            allocations = {rp: a["resources"] for rp, a in answer["allocation_request"]["allocations"].items()}
            host = _host_of(allocations, self.hosts)
            tally.place(Placement(consumer, allocations, host, group, answer.get("trees_fitted")), started)
            return True
        if r.status_code == 409 and error_code(r) == error_codes.PICK_NO_VALID_HOST:
            tally.counts["no_valid_host"] += 1
        elif r.status_code == 409:
            tally.conflict(r)
        else:
            tally.error(f"POST /berth/pick -> HTTP {r.status_code}: {r.text[:300]}")
        return False


class ClientSideClaimer:
    """Places as a scheduler does today: candidates, a choice, a claim, the next one on a 409."""

    name = "client_side_claims"

    def __init__(self, client: Client, hosts: Collection[str], group_hosts: GroupHosts | None = None):
        self.client = client
        self.hosts = hosts
        self.group_hosts = group_hosts or GroupHosts()
        self.path = f"/allocation_candidates?resources={FLAVOR_RESOURCES}&limit={CLIENT_SIDE_LIMIT}"
        self.rng = threading.local()

    def _random(self) -> random.Random:
        rng: random.Random | None = getattr(self.rng, "random", None)
        if rng is None:
            rng = self.rng.random = random.Random()
        return rng

    def place(self, tally: PlacementTally, group: str | None = None) -> bool:
        """Candidate queries and claims until one claim holds; whether one did."""
        consumer = str(uuidlib.uuid4())
        started = time.perf_counter()
        for _ in range(CLIENT_SIDE_QUERIES):
            r = self.client.get(self.path)
            tally.counts["requests"] += 1
            if r.status_code != 200:
                tally.error(f"GET /allocation_candidates -> HTTP {r.status_code}: {r.text[:300]}")
                return False
            candidates = [c["allocations"] for c in r.json()["allocation_requests"]]
            if not candidates:
                tally.counts["no_valid_host"] += 1
                return False
            self._random().shuffle(candidates)
            avoid = self.group_hosts.of(group) if group is not None else set()
            for choice in candidates:
                if avoid.intersection(choice):
                    continue
                placed = self._claim(tally, consumer, choice, group, started)
                if placed is not None:
                    return placed
        tally.counts["no_valid_host"] += 1
        return False

    def _claim(
        self, tally: PlacementTally, consumer: str, choice: dict[str, Any], group: str | None, started: float
    ) -> bool | None:
        """PUT one candidate: True placed, False failed, None refused (409: try the next)."""
        body = {
            "allocations": choice,
            "project_id": BENCH_PROJECT,
            "user_id": BENCH_USER,
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        }
        r = self.client.request("PUT", f"/allocations/{consumer}", body)
        tally.counts["requests"] += 1
        if r.status_code == 204:
            allocations = {rp: a["resources"] for rp, a in choice.items()}
            host = _host_of(allocations, self.hosts)
            if group is not None:
                self.group_hosts.add(group, host)
            tally.place(Placement(consumer, allocations, host, group), started)
            return True
        if r.status_code == 409:
            tally.conflict(r)
            return None
        tally.error(f"PUT /allocations/{consumer} -> HTTP {r.status_code}: {r.text[:300]}")
        return False
