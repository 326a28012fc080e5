"""The query string of GET /allocation_candidates as a ``CandidateQuery``, with the reference's refusals.

Each step below checks one rule of the API, in the order the reference applies them, so that a query
breaking several rules is refused with the same message as there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from werkzeug.datastructures import MultiDict

from berth.api import microversion as mv
from berth.api.microversion import Version
from berth.api.query import parse_member_of, parse_required, parse_resources
from berth.api.schemas.allocation_candidates import GROUP_KEYS, allocation_candidates_query_schema
from berth.api.validation import is_uuid, normalize_uuid, query_schema_check
from berth.domain import error_codes
from berth.domain.candidate_query import (
    AggregateQuery,
    CandidateQuery,
    GroupPolicy,
    GroupQuery,
    TraitQuery,
)
from berth.domain.errors import BadRequest

Args: TypeAlias = MultiDict[str, str]


def parse_query(args: Args, version: Version) -> CandidateQuery:
    """The request groups and options of the query string, names not yet resolved to ids."""
    query_schema_check(args, allocation_candidates_query_schema(version))
    groups = _request_groups(args, version)
    _require_resources(groups, version)
    group_policy = _group_policy(args, groups)
    limit = int(args["limit"]) if "limit" in args else None
    root_required = _root_required(args)
    same_subtree = _same_subtree(args, groups)
    return CandidateQuery(
        groups=tuple(group.query() for group in groups.values()),
        group_policy=group_policy,
        limit=limit,
        root_required=root_required,
        same_subtree=same_subtree,
        one_provider_per_tree=version < mv.NESTED_CANDIDATES,
    )


# --- request groups ---------------------------------------------------------------------------


@dataclass
class _Group:
    """One request group as its keys are read."""

    suffix: str
    # The group keys given for it (``resources``, ``required`` ...), without the suffix.
    keys: set[str] = field(default_factory=set)
    resources: dict[str, int] = field(default_factory=dict)
    traits: TraitQuery = TraitQuery()
    aggregates: AggregateQuery = AggregateQuery()
    in_tree: str | None = None

    def query(self) -> GroupQuery:
        return GroupQuery(self.suffix, tuple(self.resources.items()), self.traits, self.aggregates, self.in_tree)


def _request_groups(args: Args, version: Version) -> dict[str, _Group]:
    """The groups by suffix, in the order of their first key."""
    groups: dict[str, _Group] = {}
    for key in args:
        base, suffix = _group_key(key)
        if base is None:
            continue
        group = groups.setdefault(suffix, _Group(suffix))
        group.keys.add(base)
        _GROUP_KEY_READERS[base](group, args.getlist(key), key, version)
    return groups


def _group_key(key: str) -> tuple[str | None, str]:
    """The group key and suffix a (schema-valid) query key names, or None for another key."""
    for base in GROUP_KEYS:
        if key.startswith(base):
            return base, key[len(base) :]
    return None, ""


def _read_resources(group: _Group, values: Sequence[str], key: str, version: Version) -> None:
    group.resources = parse_resources(values[-1])


def _read_required(group: _Group, values: Sequence[str], key: str, version: Version) -> None:
    if version < mv.ANY_OF_TRAITS:
        values = values[-1:]
    group.traits = parse_required(
        values,
        allow_forbidden=version >= mv.FORBIDDEN_TRAITS,
        allow_any_of=version >= mv.ANY_OF_TRAITS,
        param=key,
    )
    _refuse_contradiction(group.traits, key)


def _refuse_contradiction(traits: TraitQuery, param: str) -> None:
    """No trait may be both required (by itself, not as one of several) and forbidden."""
    required = {name for any_of in traits.required if len(any_of) == 1 for name in any_of}
    both = sorted(required & set(traits.forbidden))
    if both:
        raise BadRequest(
            f"Conflicting required and forbidden traits found in the following traits "
            f"keys: {param}: ({', '.join(both)})"
        )


def _read_member_of(group: _Group, values: Sequence[str], key: str, version: Version) -> None:
    if len(values) > 1 and version < mv.MULTIPLE_MEMBER_OF:
        raise BadRequest("Multiple member_of parameters are not supported")
    group.aggregates = parse_member_of(values, allow_forbidden=version >= mv.FORBIDDEN_AGGREGATES)


def _read_in_tree(group: _Group, values: Sequence[str], key: str, version: Version) -> None:
    if not is_uuid(values[-1]):
        raise BadRequest(
            f"Invalid query string parameters: Expected 'in_tree' parameter to be a format of uuid. Got: {values[-1]}"
        )
    group.in_tree = normalize_uuid(values[-1])


_GROUP_KEY_READERS: Mapping[str, Callable[[_Group, Sequence[str], str, Version], None]] = {
    "resources": _read_resources,
    "required": _read_required,
    "member_of": _read_member_of,
    "in_tree": _read_in_tree,
}


def _require_resources(groups: Mapping[str, _Group], version: Version) -> None:
    """Every group needs resources before 1.36; from then on, at least one group does."""
    if not groups:
        raise BadRequest("At least one request group (`resources` or `resources{$S}`) is required.")
    if version >= mv.SAME_SUBTREE:
        if not any(g.resources for g in groups.values()):
            raise BadRequest(
                "There must be at least one resources or resources[$S] parameter.",
                code=error_codes.QUERY_MISSING_VALUE,
            )
        return
    _refuse_orphans(groups, "required", "All traits parameters must be associated with resources.  ", "traits")
    _refuse_orphans(groups, "member_of", "All member_of parameters must be associated with resources. ", "member_of")
    if any(not g.resources for g in groups.values()):
        raise BadRequest("All request groups must specify resources.")


def _refuse_orphans(groups: Mapping[str, _Group], base: str, problem: str, what: str) -> None:
    """Before 1.36: no ``base`` key may name a group without resources."""
    orphans = sorted(f"{base}{suffix}" for suffix, g in groups.items() if not g.resources and base in g.keys)
    if orphans:
        raise BadRequest(f"{problem}Found the following orphaned {what} keys: {', '.join(orphans)}")


# --- options ----------------------------------------------------------------------------------


def _group_policy(args: Args, groups: Mapping[str, _Group]) -> GroupPolicy | None:
    """Required as soon as two suffixed groups ask for resources."""
    policy = args.get("group_policy")
    if len([s for s, g in groups.items() if s and g.resources]) > 1 and policy is None:
        raise BadRequest(
            'The "group_policy" parameter is required when specifying more than one "resources{N}" parameter.'
        )
    if policy is None:
        return None
    # The schema allows no other value (in the last one given; the first is the one read, as there).
    return "isolate" if policy == "isolate" else "none"


def _root_required(args: Args) -> TraitQuery:
    """Traits the root of every answer's tree must have, or lack (1.35)."""
    if "root_required" not in args:
        return TraitQuery()
    values = args.getlist("root_required")
    if len(values) > 1:
        raise BadRequest(
            "Query parameter 'root_required' may be specified only once.", code=error_codes.QUERY_DUPLICATE_KEY
        )
    traits = parse_required(values, allow_forbidden=True, allow_any_of=False, param="root_required")
    both = sorted({name for any_of in traits.required for name in any_of} & set(traits.forbidden))
    if both:
        raise BadRequest(
            f"Conflicting required and forbidden traits found in root_required: {', '.join(both)}",
            code=error_codes.QUERY_BAD_VALUE,
        )
    return traits


def _same_subtree(args: Args, groups: Mapping[str, _Group]) -> tuple[tuple[str, ...], ...]:
    """Sets of suffixed groups to be served from one subtree (1.36); every suffixed group without
    resources must be in one."""
    same_subtree = tuple(tuple(s.strip() for s in value.split(",")) for value in args.getlist("same_subtree"))
    named = {s for suffixes in same_subtree for s in suffixes}
    if "" in named:
        raise BadRequest(
            "Empty string (unsuffixed group) can not be specified in `same_subtree` ",
            code=error_codes.QUERY_BAD_VALUE,
        )
    unknown = sorted(named - set(groups))
    if unknown:
        raise BadRequest(
            f"Real suffixes should be specified in `same_subtree`: {unknown} not found in "
            f"{sorted(s for s in groups if s)}",
            code=error_codes.QUERY_BAD_VALUE,
        )
    resourceless = sorted(s for s, g in groups.items() if s and not g.resources and s not in named)
    if resourceless:
        raise BadRequest(
            "Resourceless suffixed group request should be specified in `same_subtree` query "
            f"param: bad group(s) - {resourceless}.",
            code=error_codes.QUERY_BAD_VALUE,
        )
    return same_subtree
