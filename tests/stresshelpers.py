"""Hand-made logs for the stress audit's replay (berth.testbed.stress.replay): a claimer's events, and
the kinds of violation the replay finds in them. Imported by name, as the other helpers are."""

from __future__ import annotations

from typing import Any

from berth.testbed.stress.replay import replay


def write(seq: int, kind: str, outcome: str, changes: dict[str, Any]) -> tuple[Any, ...]:
    return ("write", seq, float(seq), kind, outcome, changes)


def observe(seq: int, seen: dict[str, Any]) -> tuple[Any, ...]:
    return ("observe", seq, float(seq), seen)


def kinds(events: list[Any], actual: dict[str, Any]) -> list[str]:
    violations, _ = replay(0, events, actual)
    return [v["what"] for v in violations]
