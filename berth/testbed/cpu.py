"""The machine's own speed and the CPU time its host gave to other machines ("steal")."""

from __future__ import annotations

import statistics
import time

CPU_CHECK_ROUNDS = 7


def _cpu_check_workload() -> int:
    # Fixed work in the interpreter (arithmetic, a dict, strings), like the server's requests.
    table = {}
    for i in range(20_000):
        table[f"k{i % 5000}"] = (i * 7919) % 104729
    return sum(table.values())


def cpu_check_ms() -> float:
    """Median wall time, in ms, of a fixed piece of Python work while the server is idle.

    A shared virtual machine's speed changes from one minute to the next (by up to a third between
    runs here); this figure, taken before the server starts and after the load, hints whether a run
    fell in a slow period.  It is a point sample: the speed also moves within a run.
    """
    times = []
    for _ in range(CPU_CHECK_ROUNDS):
        started = time.perf_counter()
        _cpu_check_workload()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def cpu_times() -> list[int] | None:
    """The machine's CPU time counters (``/proc/stat``), or None where there are none."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    return [int(value) for value in fields[1:9]] if fields[:1] == ["cpu"] and len(fields) >= 9 else None


def stolen_percent(before: list[int] | None, after: list[int] | None) -> float | None:
    """The share of the machine's CPU time between two ``cpu_times`` that its host gave to other
    machines ("steal"): the CPU time a phase could not have, whatever the server did."""
    if before is None or after is None:
        return None
    delta = [b - a for a, b in zip(before, after, strict=True)]
    total = sum(delta)  # user nice system idle iowait irq softirq steal; guest time is in user
    return round(100 * delta[7] / total, 1) if total > 0 else None
