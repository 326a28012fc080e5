"""The books of a Placement service as its API shows them: names, providers, consumers, usages.

Keyed by uuid and name, never by a database id, so that books read from two services compare
directly and load into a database that numbers its rows its own way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Called as the books are read or written: the stage ("providers", "consumers", ...), how many of
# its items are done, and how many there are.
Progress = Callable[[str, int, int], None]


def no_progress(stage: str, done: int, total: int) -> None:
    """The progress callback of a caller that asked for none."""


@dataclass(frozen=True)
class Inventory:
    total: int
    reserved: int
    min_unit: int
    max_unit: int
    step_size: int
    allocation_ratio: float


@dataclass
class Provider:
    uuid: str
    name: str
    generation: int
    parent_uuid: str | None
    root_uuid: str
    inventories: dict[str, Inventory] = field(default_factory=dict)
    traits: set[str] = field(default_factory=set)
    aggregates: set[str] = field(default_factory=set)
    # Class -> amount used, as the provider's usages answer it (classes at zero left out).
    usages: dict[str, int] = field(default_factory=dict)


@dataclass
class Consumer:
    uuid: str
    generation: int
    project_id: str
    user_id: str
    # None where the service keeps no type: before 1.38, or "unknown" from 1.38 on.
    consumer_type: str | None
    # Provider uuid -> class -> amount.
    allocations: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass
class Books:
    source: str
    microversion: str
    resource_classes: set[str] = field(default_factory=set)
    traits: set[str] = field(default_factory=set)
    providers: dict[str, Provider] = field(default_factory=dict)
    consumers: dict[str, Consumer] = field(default_factory=dict)
    # Project -> the answer of GET /usages?project_id=... (per consumer type from 1.38).
    project_usages: dict[str, dict[str, Any]] = field(default_factory=dict)

    def aggregates(self) -> set[str]:
        return {aggregate for provider in self.providers.values() for aggregate in provider.aggregates}

    def allocation_count(self) -> int:
        return sum(len(classes) for c in self.consumers.values() for classes in c.allocations.values())

    def used(self) -> dict[tuple[str, str], int]:
        """(provider uuid, class) -> the sum of every consumer's allocations there."""
        total: dict[tuple[str, str], int] = {}
        for consumer in self.consumers.values():
            for provider, classes in consumer.allocations.items():
                for resource_class, amount in classes.items():
                    key = (provider, resource_class)
                    total[key] = total.get(key, 0) + amount
        return total

    def tree_order(self) -> list[Provider]:
        """Every provider, each after its parent."""
        children: dict[str | None, list[Provider]] = {}
        for provider in self.providers.values():
            children.setdefault(provider.parent_uuid, []).append(provider)
        ordered: list[Provider] = []
        level = sorted(children.get(None, []), key=lambda p: p.uuid)
        while level:
            ordered.extend(level)
            level = sorted((c for p in level for c in children.get(p.uuid, [])), key=lambda p: p.uuid)
        return ordered
