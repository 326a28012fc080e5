"""The query string of GET /allocation_candidates as a ``CandidateQuery``, with the reference's refusals.

Each step below checks one rule of the API, in the order the reference applies them, so that a query
breaking several rules is refused with the same message as there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeAlias

from werkzeug.datastructures import MultiDict

from berth.api import microversion as mv
from berth.api.candidates.query import parse_member_of, parse_required, parse_resources
from berth.api.microversion import Version
from berth.api.schemas.placement.allocation_candidates import GROUP_KEYS, allocation_candidates_query_schema
from berth.api.validation import JsonSchema, is_uuid, normalize_uuid, query_schema_check, validate
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
    """The request groups and options of the query string, names not yet resolved to ids.

    The steps run in the reference's order: the options that apply to the whole request, then each
    request group's keys, then the rules over all groups, then ``group_policy``.
    """
    schema = allocation_candidates_query_schema(version)
    query_schema_check(args, schema)
    _check_first_values(args, schema)
    limit_value = _first(args, "limit")
    limit = int(limit_value) if limit_value is not None else None
    policy = _first(args, "group_policy")
    root_required = _root_required(args)
    same_subtree = _same_subtree(args)
    groups = _request_groups(args, version)
    if version >= mv.SAME_SUBTREE:
        _require_resources_or_subtree(groups, same_subtree)
    else:
        _require_resources(groups)
    if version >= mv.FORBIDDEN_TRAITS:
        _refuse_contradictions(groups)
    group_policy = _group_policy(policy, groups)
    return CandidateQuery(
        groups=tuple(group.query() for group in groups.values()),
        group_policy=group_policy,
        limit=limit,
        root_required=root_required,
        same_subtree=same_subtree,
        one_provider_per_tree=version < mv.NESTED_CANDIDATES,
    )


# --- options of the whole request -------------------------------------------------------------

# The keys of which the reference uses the first value given (``req.GET.getall(key)[0]``), where
# every other key taken singly counts for its last (``req.GET[key]``, and each value in turn for the
# group keys).  Its schema check judges the last value of every key, these included.
FIRST_VALUE_KEYS: Final = ("limit", "group_policy")


def _first(args: Args, key: str) -> str | None:
    values = args.getlist(key)
    return values[0] if values else None


def _check_first_values(args: Args, schema: JsonSchema) -> None:
    """The first value of a key read by its first value meets the schema too: the value used is a
    value checked (the reference checks only the last, and fails with a 500 on ``limit=x&limit=5``)."""
    if any(len(args.getlist(key)) > 1 for key in FIRST_VALUE_KEYS):
        first = {key: args.getlist(key)[0] for key in FIRST_VALUE_KEYS if key in args}
        validate({**{key: args.getlist(key)[-1] for key in args}, **first}, schema, "Invalid query string parameters")


def _root_required(args: Args) -> TraitQuery:
    """Traits the root of every answer's tree must have, or lack (1.35)."""
    if "root_required" not in args:
        return TraitQuery()
    values = args.getlist("root_required")
    if len(values) > 1:
        raise BadRequest(
            "Query parameter 'root_required' may be specified only once.", code=error_codes.QUERY_DUPLICATE_KEY
        )
    traits = parse_required(values, allow_forbidden=True, allow_any_of=False)
    both = sorted({name for any_of in traits.required for name in any_of} & set(traits.forbidden))
    if both:
        raise BadRequest(
            f"Conflicting required and forbidden traits found in root_required: {', '.join(both)}",
            code=error_codes.QUERY_BAD_VALUE,
        )
    return traits


def _same_subtree(args: Args) -> tuple[tuple[str, ...], ...]:
    """Sets of suffixed groups to be served from one subtree (1.36)."""
    same_subtree = tuple(tuple(s.strip() for s in value.split(",")) for value in args.getlist("same_subtree"))
    if any("" in suffixes for suffixes in same_subtree):
        raise BadRequest(
            "Empty string (unsuffixed group) can not be specified in `same_subtree` ",
            code=error_codes.QUERY_BAD_VALUE,
        )
    return same_subtree


# --- request groups ---------------------------------------------------------------------------


@dataclass
class _Group:
    """One request group as its keys are read."""

    suffix: str
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
        _GROUP_KEY_READERS[base](group, args.getlist(key), version)
    return groups


def _group_key(key: str) -> tuple[str | None, str]:
    """The group key and suffix a (schema-valid) query key names, or None for another key."""
    for base in GROUP_KEYS:
        if key.startswith(base):
            return base, key[len(base) :]
    return None, ""


# Each reader checks every value given for its key, in order, as the reference does; a key that
# takes one value keeps the last.


def _read_resources(group: _Group, values: Sequence[str], version: Version) -> None:
    for value in values:
        group.resources = parse_resources(value)


def _read_required(group: _Group, values: Sequence[str], version: Version) -> None:
    if version < mv.ANY_OF_TRAITS:
        values = values[-1:]
    group.traits = parse_required(
        values, allow_forbidden=version >= mv.FORBIDDEN_TRAITS, allow_any_of=version >= mv.ANY_OF_TRAITS
    )


def _read_member_of(group: _Group, values: Sequence[str], version: Version) -> None:
    if len(values) > 1 and version < mv.MULTIPLE_MEMBER_OF:
        raise BadRequest(f"Multiple member_of{group.suffix} parameters are not supported")
    group.aggregates = parse_member_of(values, allow_forbidden=version >= mv.FORBIDDEN_AGGREGATES, suffix=group.suffix)


def _read_in_tree(group: _Group, values: Sequence[str], version: Version) -> None:
    for value in values:
        if not is_uuid(value.strip()):
            raise BadRequest(
                f"Invalid query string parameters: Expected 'in_tree' parameter to be a format of uuid. Got: {value}"
            )
        group.in_tree = normalize_uuid(value.strip())


_GROUP_KEY_READERS: Mapping[str, Callable[[_Group, Sequence[str], Version], None]] = {
    "resources": _read_resources,
    "required": _read_required,
    "member_of": _read_member_of,
    "in_tree": _read_in_tree,
}


# --- rules over all the groups ---------------------------------------------------------------------


def _require_resources_or_subtree(groups: Mapping[str, _Group], same_subtree: Sequence[Sequence[str]]) -> None:
    """From 1.36: some group has resources, and every group without them is a suffixed group
    named in ``same_subtree`` (the unsuffixed group, whose suffix is the empty string, never is);
    every suffix ``same_subtree`` names is a group's."""
    resourceless = [suffix for suffix, group in groups.items() if not group.resources]
    if len(resourceless) == len(groups):
        raise BadRequest(
            "There must be at least one resources or resources[$S] parameter.",
            code=error_codes.QUERY_MISSING_VALUE,
        )
    named = {suffix for suffixes in same_subtree for suffix in suffixes}
    outside = sorted(suffix for suffix in resourceless if suffix not in named)
    if outside:
        raise BadRequest(
            "Resourceless suffixed group request should be specified in `same_subtree` query param: "
            f"bad group(s) - {outside}.",
            code=error_codes.QUERY_BAD_VALUE,
        )
    unknown = sorted(named - set(groups))
    if unknown:
        raise BadRequest(
            f"Real suffixes should be specified in `same_subtree`: {unknown} not found in {list(groups)}.",
            code=error_codes.QUERY_BAD_VALUE,
        )


def _require_resources(groups: Mapping[str, _Group]) -> None:
    """Before 1.36: every group has resources; traits or aggregates without them are named."""
    _refuse_orphans(
        [f"required{s}" for s, g in groups.items() if not g.resources and g.traits.required],
        "All traits parameters must be associated with resources.  Found the following orphaned traits keys",
    )
    _refuse_orphans(
        [f"member_of{s}" for s, g in groups.items() if not g.resources and g.aggregates.uuids()],
        "All member_of parameters must be associated with resources. Found the following orphaned member_of keys",
    )
    if not all(g.resources for g in groups.values()):
        raise BadRequest("All request groups must specify resources.")
    if not groups:
        raise BadRequest("At least one request group (`resources` or `resources{$S}`) is required.")


def _refuse_orphans(orphans: Sequence[str], problem: str) -> None:
    if orphans:
        raise BadRequest(f"{problem}: {', '.join(orphans)}")


def _refuse_contradictions(groups: Mapping[str, _Group]) -> None:
    """No group may require a trait (or every trait of an any-of set) that it also forbids."""
    contradictions = sorted(
        f"required{suffix}: ({', '.join(sorted(set(any_of)))})"
        for suffix, group in groups.items()
        for any_of in group.traits.required
        if set(any_of) <= set(group.traits.forbidden)
    )
    if contradictions:
        raise BadRequest(
            "Conflicting required and forbidden traits found in the following traits keys: " + ", ".join(contradictions)
        )


def _group_policy(policy: str | None, groups: Mapping[str, _Group]) -> GroupPolicy | None:
    """Required as soon as two suffixed groups are named, with resources or without."""
    if policy is None:
        if len([suffix for suffix in groups if suffix]) > 1:
            raise BadRequest(
                'The "group_policy" parameter is required when specifying more than one "resources{N}" parameter.'
            )
        return None
    # The schema allows no other value.
    return "isolate" if policy == "isolate" else "none"
