"""What a pick that preempts costs, beside one that does not, on the same hosts (the pick phase's
last step, after the quota rounds).

For each of up to ``PREEMPT_HOSTS`` hosts, one at a time: a pick of the bench's flavor into that
host (``in_tree``) while it has room, timed; then the host's VCPUs filled with consumers of the
default priority (up to ``max_unit`` each), and a pick of the flavor at ``PREEMPT_PRIORITY`` that
may preempt, into the same host, timed: nothing fits there as the cloud stands, so it removes one
of them. Its victims are read from the whole cloud (every consumer of a lower priority, as the
service finds them), so the cost grows with what the cloud holds. Every consumer made is deleted
at the end.
"""

from __future__ import annotations

import statistics
import time
import uuid as uuidlib
from typing import Any

from berth.domain.capacity import capacity
from berth.testbed.bench import log
from berth.testbed.bench.cloud import BENCH_PROJECT, BENCH_USER
from berth.testbed.bench.phases.placing import FLAVOR_RESOURCES, release_consumers
from berth.testbed.client import Client
from berth.testbed.parallel import Stop

PREEMPT_HOSTS = 20
PREEMPT_PRIORITY = 10


def measure_preemption(client: Client, hosts: list[str], count: int, threads: int, stop: Stop) -> dict[str, Any]:
    """The figures of ``count`` (at most ``PREEMPT_HOSTS``) hosts' plain and preempting picks."""
    chosen = sorted(hosts)[: min(count, PREEMPT_HOSTS)]
    log(f"  preemption: a plain pick, then a preempting one, into each of {len(chosen)} hosts")
    made: list[str] = []
    plain: list[float] = []
    preempting: list[float] = []
    victims = 0
    errors: list[str] = []
    try:
        for host in chosen:
            if stop:
                raise KeyboardInterrupt
            took, answer = _pick(client, host, made)
            if answer is None:
                errors.append(f"plain pick into {host}: {took}")
                continue
            plain.append(took)
            _fill(client, host, made)
            took, answer = _pick(client, host, made, priority=PREEMPT_PRIORITY, preempt=True)
            if answer is None or not answer.get("preempted"):
                errors.append(f"preempting pick into {host}: {took if answer is None else 'no victim'}")
                continue
            preempting.append(took)
            victims += len(answer["preempted"])
    finally:
        release_consumers(client, made, threads, stop)
    plain_ms, preempting_ms = _median(plain), _median(preempting)
    figures: dict[str, Any] = {
        "hosts": len(chosen),
        "priority": PREEMPT_PRIORITY,
        "plain_median_ms": plain_ms,
        "preempting_median_ms": preempting_ms,
        "preempting_max_ms": round(max(preempting), 2) if preempting else None,
        "victims": victims,
        "errors": len(errors),
        "error_samples": errors[:5],
    }
    if plain_ms and preempting_ms:
        figures["cost_ratio"] = round(preempting_ms / plain_ms, 2)
    log(
        f"  preemption: plain pick median {figures['plain_median_ms']} ms, preempting "
        f"{figures['preempting_median_ms']} ms ({figures.get('cost_ratio')}×), {victims} victims, {len(errors)} errors"
    )
    return figures


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def _pick(
    client: Client, host: str, made: list[str], *, resources: str = FLAVOR_RESOURCES, **extra: Any
) -> tuple[Any, dict[str, Any] | None]:
    """One pick into the host's tree: its time in ms and its answer, or what went wrong and None."""
    consumer = str(uuidlib.uuid4())
    body: dict[str, Any] = {
        "query": {"resources": resources, "in_tree": host},
        "consumer": {"uuid": consumer, "project_id": BENCH_PROJECT, "user_id": BENCH_USER, "consumer_type": "INSTANCE"},
        **extra,
    }
    started = time.perf_counter()
    r = client.request("POST", "/berth/pick", body)
    took = (time.perf_counter() - started) * 1000
    if r.status_code != 200:
        return f"HTTP {r.status_code}: {r.text[:200]}", None
    made.append(consumer)
    return took, r.json()


def _fill(client: Client, host: str, made: list[str]) -> None:
    """The host's free VCPUs taken by consumers of the default priority, ``max_unit`` at most each."""
    inventory = client.call("GET", f"/resource_providers/{host}/inventories")["inventories"]["VCPU"]
    used = client.call("GET", f"/resource_providers/{host}/usages")["usages"].get("VCPU", 0)
    free = capacity(inventory["total"], inventory["reserved"], inventory["allocation_ratio"]) - used
    while free > 0:
        amount = min(free, inventory["max_unit"])
        took, answer = _pick(client, host, made, resources=f"VCPU:{amount}")
        if answer is None:
            raise RuntimeError(f"filling host {host} with VCPU:{amount}: {took}")
        free -= amount
