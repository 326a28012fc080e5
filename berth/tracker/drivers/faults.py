"""Spawn failures on request, for tests and the simulator (the fake driver's ``faults``).

    faults:
      fail_next_spawns: 2          # the next two spawns fail, whatever else is set
      spawn_failure_rate: 0.1      # then each spawn fails with this probability ...
      seed: 7                      # ... drawn from a generator seeded with this (a run is repeatable)
      spawn_seconds: 2.5           # and each spawn takes this long (a guest slow to start)

The same keys are accepted by the agent's ``POST /faults``: the keys given replace the current
values, a new ``seed`` restarts the generator. Faults are not persisted: a restarted agent starts
again from its configuration.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

KEYS = ("fail_next_spawns", "spawn_failure_rate", "seed", "spawn_seconds")
# The longest a spawn may be made to take.
MAX_SPAWN_SECONDS = 60.0


@dataclass
class SpawnFaults:
    fail_next_spawns: int = 0
    spawn_failure_rate: float = 0.0
    seed: int | None = None
    spawn_seconds: float = 0.0
    _draw: random.Random = field(default_factory=random.Random, repr=False)

    def update(self, data: dict[str, Any]) -> None:
        """Apply the settings given (``KEYS``); raise ``ValueError`` naming the first wrong one."""
        unknown = sorted(set(data) - set(KEYS))
        if unknown:
            raise ValueError(f"faults: unknown keys: {', '.join(unknown)} (known: {', '.join(KEYS)})")
        count = data.get("fail_next_spawns", self.fail_next_spawns)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"faults: fail_next_spawns must be a whole number >= 0, not {count!r}")
        rate = data.get("spawn_failure_rate", self.spawn_failure_rate)
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0.0 <= rate <= 1.0:
            raise ValueError(f"faults: spawn_failure_rate must be a number from 0 to 1, not {rate!r}")
        seed = data.get("seed", self.seed)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"faults: seed must be a whole number, not {seed!r}")
        delay = data.get("spawn_seconds", self.spawn_seconds)
        if isinstance(delay, bool) or not isinstance(delay, int | float) or not 0.0 <= delay <= MAX_SPAWN_SECONDS:
            raise ValueError(f"faults: spawn_seconds must be a number from 0 to {MAX_SPAWN_SECONDS:g}, not {delay!r}")
        self.fail_next_spawns, self.spawn_failure_rate, self.spawn_seconds = count, float(rate), float(delay)
        if "seed" in data:
            self.seed = seed
            self._draw = random.Random(seed)

    def next_spawn_fails(self) -> str | None:
        """Whether the spawn about to happen fails, and why (None: it goes ahead)."""
        if self.fail_next_spawns > 0:
            self.fail_next_spawns -= 1
            return f"injected fault: failing the next spawns ({self.fail_next_spawns} more)"
        if self.spawn_failure_rate > 0 and self._draw.random() < self.spawn_failure_rate:
            return f"injected fault: spawns fail with probability {self.spawn_failure_rate}"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "fail_next_spawns": self.fail_next_spawns,
            "spawn_failure_rate": self.spawn_failure_rate,
            "seed": self.seed,
            "spawn_seconds": self.spawn_seconds,
        }
