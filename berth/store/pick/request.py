"""What a pick is asked (``PickRequest``) and what it answers (``Pick``, with its ``Alternate``s)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from berth.domain.candidate_query import CandidateQuery
from berth.domain.weighing import Multipliers, SoftGroupPolicy
from berth.store.server_groups.membership import ServerGroup


@dataclass(frozen=True)
class Consumer:
    uuid: str
    project_id: str
    user_id: str
    consumer_type: str


@dataclass(frozen=True)
class PickRequest:
    query: CandidateQuery
    multipliers: Multipliers
    consumer: Consumer
    server_group: ServerGroup | None = None
    lease_seconds: float | None = None
    # How many other trees to name besides the one claimed (``berth.store.pick.alternates``).
    alternates: int = 0
    # Kept with the consumer (``berth.store.pick.priorities``); a preempting pick may remove
    # consumers of strictly lower priority when nothing fits (``berth.store.pick.preemption``).
    priority: int = 0
    preempt: bool = False
    # Uuids of trees neither chosen nor made room on (``berth.store.pick.avoided``).
    avoid_trees: frozenset[str] = frozenset()
    # The consumer a move places again (its instance; ``consumer`` is the move's own): what it holds,
    # which the claim takes over when the move lands, counts as freed towards the quota
    # (``berth.store.pick.quota_check``), and where it is does not count against its group.
    moving: str | None = None


@dataclass(frozen=True)
class Alternate:
    """Another tree that would take the request, unclaimed: one allocation request that fits it, in
    names, and its weight."""

    root_provider_uuid: str
    # provider uuid -> resource class -> amount
    allocations: dict[str, dict[str, int]]
    # request group suffix -> provider uuids
    mappings: dict[str, list[str]]
    weight: float


@dataclass(frozen=True)
class Preempted:
    """A consumer a preempting pick removed, whole, to make room on the tree it claimed."""

    consumer_uuid: str
    project_id: str
    priority: int
    root_provider_uuid: str
    user_id: str = ""
    # What it held of the classes the pick asked for, by name: freed towards the pick's quota.
    held: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Pick:
    """The claim written: the allocation request chosen, in names, and how it was chosen."""

    # provider uuid -> resource class -> amount
    allocations: dict[str, dict[str, int]]
    # request group suffix -> provider uuids
    mappings: dict[str, list[str]]
    root_provider_uuid: str
    weight: float
    # Trees that fit the request, and of those the trees the server group allowed.
    trees_fitted: int
    trees_weighed: int
    # Up to ``PickRequest.alternates`` other trees, best first; nothing written for them.
    alternates: tuple[Alternate, ...] = ()
    # The consumers removed to make room, when the pick preempted.
    preempted: tuple[Preempted, ...] = ()


def soft_policy(group: ServerGroup | None) -> SoftGroupPolicy | None:
    """The group's policy when it weighs trees rather than filters them."""
    if group is None:
        return None
    if group.policy == "soft-affinity":
        return "soft-affinity"
    if group.policy == "soft-anti-affinity":
        return "soft-anti-affinity"
    return None
