"""The claimer processes of a run: started together, let go at once, collected at the end."""

from __future__ import annotations

import multiprocessing
import queue
import random
import time
from typing import Any

from berth.testbed.errors import TestbedError
from berth.testbed.stress.claimer import claimer_main
from berth.testbed.stress.config import StressConfig, pick_share

READY_TIMEOUT = 120.0


class ClaimerPool:
    """``config.concurrency`` forked claimers, spread evenly over the servers at ``bases``; ``collected``
    maps each claimer to what it reported."""

    def __init__(self, config: StressConfig, bases: list[str], layout: dict[str, Any], rng: random.Random):
        # Forked claimers start in milliseconds; "spawn" and "forkserver" would import the main module
        # (all of berth.cli.main, or pytest) again in every claimer, seconds each on a small machine.
        # The children only use connections of their own, and leave through os._exit (no atexit hooks).
        ctx = multiprocessing.get_context("fork")
        self.ready, self.results = ctx.Queue(), ctx.Queue()
        self.go, self.stop = ctx.Event(), ctx.Event()
        self.end_at = ctx.Value("d", float("inf"), lock=False)
        self.collected: dict[int, dict[str, Any]] = {}
        self.processes = [
            ctx.Process(
                target=claimer_main,
                name=f"stress-claimer-{i}",
                daemon=True,
                args=(
                    i,
                    bases[i % len(bases)],
                    layout,
                    rng.randrange(2**32),
                    config.fault,
                    config.operations,
                    pick_share(config),
                    self.ready,
                    self.go,
                    self.stop,
                    self.end_at,
                    self.results,
                ),
            )
            for i in range(config.concurrency)
        ]

    def start(self, seconds: float | None) -> None:
        """Start the claimers, wait until all are ready, then let them go (for ``seconds`` if given)."""
        for p in self.processes:
            p.start()
        for _ in self.processes:
            self.ready.get(timeout=READY_TIMEOUT)
        if seconds is not None:
            self.end_at.value = time.time() + seconds  # claimers stop even while a fault blocks us
        self.go.set()

    @property
    def finished(self) -> bool:
        return len(self.collected) == len(self.processes)

    def collect(self, until: float) -> None:
        """Take the claimers' reports until all are in or ``until`` (monotonic time) has come."""
        while not self.finished:
            left = until - time.monotonic()
            if left <= 0:
                return
            try:
                index, data = self.results.get(timeout=min(left, 0.5))
            except queue.Empty:
                if not any(p.is_alive() for p in self.processes) and self.results.empty():
                    raise TestbedError("claimer processes died without reporting") from None
                continue
            self.collected[index] = data

    def close(self) -> None:
        self.stop.set()
        self.go.set()
        for p in self.processes:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()
