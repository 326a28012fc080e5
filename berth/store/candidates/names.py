"""Names and ids on the allocation candidate path, both ways.

``resolve`` turns a ``CandidateQuery`` of names into the ``CandidateRequest`` of ids the search works
with.  The names are looked up in the order the reference checks them, so that a query naming several
unknown things is refused for the same one: resource classes first, then traits.  Unknown aggregates
are no error (a group that must be in one of them matches nothing), nor is an unknown ``in_tree``
provider (its group matches nothing).

``AnswerNames`` gives the names an answer shows for the ids the search found.  Provider uuids beyond
those loaded and trait names are read on first use only: most answers are rendered from pieces kept
with the providers' copies (``ProviderCache.memo``) and need neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

from sqlalchemy import Connection

from berth.domain.candidate_query import CandidateQuery, GroupQuery, TraitQuery
from berth.domain.candidate_request import CandidateRequest, RequestGroup
from berth.domain.candidates import ProviderData
from berth.domain.errors import BadRequest
from berth.store.placement import names
from berth.store.placement.aggregates import aggregate_ids
from berth.store.rawsql import fetch

_ROOTS_BY_UUID = "SELECT uuid, root_provider_id FROM resource_providers WHERE uuid IN {ids}"


@dataclass(frozen=True)
class ResolvedQuery:
    """The request of ids, and the ids of the names the query gave."""

    request: CandidateRequest
    class_ids: Mapping[str, int]
    trait_ids: Mapping[str, int]
    aggregate_ids: Mapping[str, int]


def resolve(conn: Connection, query: CandidateQuery) -> ResolvedQuery:
    """The query's names as ids; a 400 for an unknown resource class or trait, the first the
    reference looks up: ``root_required``'s traits, then each group in the order of the query
    (its classes in the order given, then its traits).  Unlike the reference, every group's names
    are looked up, also after a group that no provider meets (docs/compatibility.md)."""
    class_ids = names.resource_class_ids(conn, {name for group in query.groups for name, _ in group.resources})
    trait_ids = names.trait_ids(
        conn, query.root_required.names() | {name for group in query.groups for name in group.traits.names()}
    )
    _refuse_unknown(query, class_ids, trait_ids)
    found_aggregates = aggregate_ids(conn, {uuid for group in query.groups for uuid in group.aggregates.uuids()})
    tree_roots = roots_of_trees(conn, {group.in_tree for group in query.groups if group.in_tree is not None})
    request = CandidateRequest(
        groups=[_request_group(group, class_ids, trait_ids, found_aggregates, tree_roots) for group in query.groups],
        isolate=query.group_policy == "isolate",
        same_subtree=[list(suffixes) for suffixes in query.same_subtree],
        root_required=_required_ids(query.root_required, trait_ids),
        root_forbidden=frozenset(trait_ids[name] for name in query.root_required.forbidden),
        one_provider_per_tree=query.one_provider_per_tree,
    )
    return ResolvedQuery(request, class_ids, trait_ids, found_aggregates)


def _refuse_unknown(query: CandidateQuery, class_ids: Mapping[str, int], trait_ids: Mapping[str, int]) -> None:
    """The reference names the first unknown name it looks up, alone."""
    _refuse_unknown_traits(query.root_required, trait_ids)
    for group in query.groups:
        for name, _ in group.resources:
            if name not in class_ids:
                raise BadRequest(f"Invalid resource class in resources parameter: No such resource class {name}.")
        _refuse_unknown_traits(group.traits, trait_ids)


def _refuse_unknown_traits(traits: TraitQuery, trait_ids: Mapping[str, int]) -> None:
    """The first unknown trait: of the required ones in the order given, then of the forbidden."""
    for name in [*(name for any_of in traits.required for name in any_of), *traits.forbidden]:
        if name not in trait_ids:
            raise names.UnknownTraits([name])


def roots_of_trees(conn: Connection, provider_uuids: Iterable[str]) -> dict[str, int]:
    """The root of each of these providers' trees; unknown providers are absent from the answer."""
    wanted = sorted(provider_uuids)
    return dict(fetch(conn, _ROOTS_BY_UUID, ids=wanted)) if wanted else {}


def _required_ids(traits: TraitQuery, trait_ids: Mapping[str, int]) -> list[frozenset[int]]:
    return [frozenset(trait_ids[name] for name in any_of) for any_of in traits.required]


def _request_group(
    group: GroupQuery,
    class_ids: Mapping[str, int],
    trait_ids: Mapping[str, int],
    aggregate_ids: Mapping[str, int],
    tree_roots: Mapping[str, int],
) -> RequestGroup:
    aggregates = group.aggregates
    return RequestGroup(
        suffix=group.suffix,
        resources={class_ids[name]: amount for name, amount in group.resources},
        required=_required_ids(group.traits, trait_ids),
        forbidden=frozenset(trait_ids[name] for name in group.traits.forbidden),
        # An aggregate nobody is in leaves its any-of set empty, which no provider meets.
        member_of=[
            frozenset(aggregate_ids[u] for u in any_of if u in aggregate_ids) for any_of in aggregates.member_of
        ],
        forbidden_aggregates=frozenset(aggregate_ids[u] for u in aggregates.forbidden if u in aggregate_ids),
        in_tree_root=tree_roots.get(group.in_tree) if group.in_tree is not None else None,
        impossible=group.in_tree is not None and group.in_tree not in tree_roots,
    )


# --- ids to names ---------------------------------------------------------------------------

_UUIDS = "SELECT id, uuid FROM resource_providers WHERE id IN {ids}"


class AnswerNames:
    """Names for the providers an answer may show, read through the request's connection."""

    def __init__(self, conn: Connection, providers: Mapping[int, ProviderData], requested_classes: Iterable[int]):
        self.conn = conn
        self.providers = providers
        # Eagerly: the names of custom classes are part of the key of every piece kept with a copy.
        self.class_names: Mapping[int, str] = names.resource_class_names_of(
            conn, set(requested_classes).union(*[p.inventories for p in providers.values()])
        )

    @cached_property
    def provider_uuids(self) -> Mapping[int, str]:
        """Of every provider loaded, and of the parents and roots of those (nested sharing
        providers') that were not."""
        providers = self.providers
        uuids = {pid: p.uuid for pid, p in providers.items()}
        missing = {
            i for p in providers.values() for i in (p.parent_id, p.root_id) if i is not None and i not in providers
        }
        if missing:
            uuids.update(fetch(self.conn, _UUIDS, ids=missing))
        return uuids

    @cached_property
    def trait_names(self) -> Mapping[int, str]:
        """Of every trait of the providers loaded."""
        return names.trait_names_of(self.conn, {t for p in self.providers.values() for t in p.traits})
