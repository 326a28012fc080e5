"""The scheduler's errors, under one root.

SchedulerError     anything the scheduler refuses
├── SpecError      a flavor, image or request that cannot be turned into a request spec; it names
│                  the extra spec or image property at fault and what is wrong with it, and is
│                  raised before any query is sent
└── ConfigError    the scheduler's own settings are wrong (a PCI alias, a zone's aggregates)
"""

from __future__ import annotations


class SchedulerError(Exception):
    """The root: anything the scheduler refuses."""


class SpecError(SchedulerError):
    """``key`` (an extra spec, an image property or an argument) is wrong; ``problem`` says how."""

    def __init__(self, key: str, problem: str):
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


class ConfigError(SchedulerError):
    """A setting of the scheduler is wrong; the message names it."""
