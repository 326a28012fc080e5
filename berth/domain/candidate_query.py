"""An allocation candidate query as the client put it: request groups and options, by name.

Pure data, built by the API from a query string and turned by the store into a ``CandidateRequest``
of ids (``berth.store.candidates.names.resolve``).  Everything keeps the order the client gave, because
the answer lists resources in that order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

GroupPolicy: TypeAlias = Literal["none", "isolate"]


@dataclass(frozen=True)
class TraitQuery:
    """Traits by name: each entry of ``required`` is an any-of set (a plain name is a set of one),
    and every entry must be met; none of ``forbidden`` may be present."""

    required: tuple[tuple[str, ...], ...] = ()
    forbidden: tuple[str, ...] = ()

    def names(self) -> set[str]:
        return {name for any_of in self.required for name in any_of} | set(self.forbidden)


@dataclass(frozen=True)
class AggregateQuery:
    """Aggregates by uuid: each entry of ``member_of`` is an any-of set, and every entry must be
    met; none of ``forbidden`` may be."""

    member_of: tuple[tuple[str, ...], ...] = ()
    forbidden: tuple[str, ...] = ()

    def uuids(self) -> set[str]:
        return {uuid for any_of in self.member_of for uuid in any_of} | set(self.forbidden)


@dataclass(frozen=True)
class GroupQuery:
    """One request group: the unsuffixed one (``suffix == ""``) or a suffixed one."""

    suffix: str
    # (resource class name, amount) in the order asked; empty for a group without resources (1.36).
    resources: tuple[tuple[str, int], ...] = ()
    traits: TraitQuery = TraitQuery()
    aggregates: AggregateQuery = AggregateQuery()
    # The uuid of a provider whose tree the group must be served from.
    in_tree: str | None = None


@dataclass(frozen=True)
class CandidateQuery:
    # In the order their first key came in the query string.
    groups: tuple[GroupQuery, ...]
    group_policy: GroupPolicy | None = None
    limit: int | None = None
    root_required: TraitQuery = TraitQuery()
    # Sets of suffixes whose providers must share one subtree.
    same_subtree: tuple[tuple[str, ...], ...] = ()
    # Before microversion 1.29 an answer may use only one provider of each tree.
    one_provider_per_tree: bool = False
