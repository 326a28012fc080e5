"""The conductor's errors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from berth.scheduler.explain import NoValidHost as SchedulerNoValidHost


class ConductorError(Exception):
    """An operation could not be done (its journal row says what was undone)."""


class UnknownHost(ConductorError):
    """No agent is known for a host an operation needs."""


class NoValidHost(SchedulerNoValidHost, ConductorError):
    """Every host tried refused the instance: ``attempts`` holds, per host, why (the scheduler's own
    NoValidHost when it found none, as the first attempt's reason)."""

    def __init__(self, instance_uuid: str, attempts: Sequence[dict[str, Any]], candidates: int = 0):
        tried = "; ".join(f"{a.get('host') or 'scheduler'}: {a['reason']}" for a in attempts)
        super().__init__(
            f"No valid host for instance {instance_uuid} after {len(attempts)} attempt(s): {tried}",
            candidates=candidates,
            refused_claims=[str(a["host"]) for a in attempts if a.get("host")],
        )
        self.attempts = list(attempts)
