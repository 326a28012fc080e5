"""What a pick is asked (``PickRequest``) and what it answers (``Pick``)."""

from __future__ import annotations

from dataclasses import dataclass

from berth.domain.candidate_query import CandidateQuery
from berth.domain.weighing import Multipliers, SoftGroupPolicy
from berth.store.server_groups import GroupPolicy


@dataclass(frozen=True)
class Consumer:
    uuid: str
    project_id: str
    user_id: str
    consumer_type: str


@dataclass(frozen=True)
class ServerGroup:
    uuid: str
    policy: GroupPolicy


@dataclass(frozen=True)
class PickRequest:
    query: CandidateQuery
    multipliers: Multipliers
    consumer: Consumer
    server_group: ServerGroup | None = None
    lease_seconds: float | None = None


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


def soft_policy(group: ServerGroup | None) -> SoftGroupPolicy | None:
    """The group's policy when it weighs trees rather than filters them."""
    if group is None:
        return None
    if group.policy == "soft-affinity":
        return "soft-affinity"
    if group.policy == "soft-anti-affinity":
        return "soft-anti-affinity"
    return None
