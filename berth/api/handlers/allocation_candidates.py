"""GET /allocation_candidates: where could this request go?"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import sqlalchemy as sa

from berth.api.query import AggregateFilter, TraitFilter, parse_member_of, parse_required, parse_resources
from berth.api.responses import json_response
from berth.api.validation import is_uuid, normalize_uuid
from berth.domain.capacity import capacity
from berth.domain.candidates import CandidateRequest, RequestGroup
from berth.domain.errors import BadRequest
from berth.store import names, providers as provider_store
from berth.store.candidates import CandidateFinder
from berth.store.explain import explain
from berth.store.rawsql import fetch
from berth.store.schema import placement_aggregates, resource_providers, traits

GROUP_KEYS = ("resources", "required", "member_of", "in_tree")
_NUMBERED = re.compile(r"^(resources|required|member_of|in_tree)([1-9][0-9]*)$")
_NAMED = re.compile(r"^(resources|required|member_of|in_tree)([a-zA-Z0-9_-]{1,64})$")
_LIMIT = re.compile(r"^[1-9][0-9]*$")

@dataclass
class ParsedGroup:
    suffix: str
    resources: dict[str, int] = field(default_factory=dict)
    traits: TraitFilter = field(default_factory=TraitFilter)
    aggregates: AggregateFilter = field(default_factory=AggregateFilter)
    in_tree: str | None = None
    keys: set = field(default_factory=set)


def _suffix_of(key: str, version):
    if key in GROUP_KEYS:
        return key, ""
    if version.at_least(25):
        match = _NUMBERED.match(key)
        if match:
            return match.group(1), match.group(2)
    if version.at_least(33):
        match = _NAMED.match(key)
        if match:
            return match.group(1), match.group(2)
    return None, None


def _allowed_plain_keys(version):
    keys = {"resources", "limit"} if version.at_least(16) else {"resources"}
    if version.at_least(17):
        keys.add("required")
    if version.at_least(21):
        keys.add("member_of")
    if version.at_least(25):
        keys.add("group_policy")
    if version.at_least(31):
        keys.add("in_tree")
    if version.at_least(35):
        keys.add("root_required")
    if version.at_least(36):
        keys.add("same_subtree")
    return keys


def parse_query(call):
    """The request groups and options of the query string, names not yet resolved to ids."""
    args, version = call.args, call.version
    allowed = _allowed_plain_keys(version)
    groups: dict[str, ParsedGroup] = {}
    for key in args.keys():
        base, suffix = _suffix_of(key, version)
        if base is None or (suffix == "" and key not in allowed):
            if key in allowed:
                continue
            raise BadRequest(f"Invalid query string parameters: Additional properties are not allowed "
                             f"('{key}' was unexpected)")
        if suffix and base == "in_tree" and not version.at_least(31):
            raise BadRequest(f"Invalid query string parameters: Additional properties are not allowed "
                             f"('{key}' was unexpected)")
        group = groups.setdefault(suffix, ParsedGroup(suffix))
        group.keys.add(base)
        values = args.getlist(key)
        if base == "resources":
            group.resources = parse_resources(values[-1])
        elif base == "required":
            if not version.at_least(39):
                values = values[-1:]
            group.traits = parse_required(values, allow_forbidden=version.at_least(22),
                                          allow_any_of=version.at_least(39), param=key)
            _refuse_contradiction(group.traits, key)
        elif base == "member_of":
            if len(values) > 1 and not version.at_least(24):
                raise BadRequest("Multiple member_of parameters are not supported")
            group.aggregates = parse_member_of(values, allow_forbidden=version.at_least(32))
        elif base == "in_tree":
            if not is_uuid(values[-1]):
                raise BadRequest(f"Invalid query string parameters: Expected 'in_tree' parameter to be a "
                                 f"format of uuid. Got: {values[-1]}")
            group.in_tree = normalize_uuid(values[-1])

    if not any(g.resources for g in groups.values()):
        if not version.at_least(25):
            raise BadRequest("Invalid query string parameters: 'resources' is a required property")
        raise BadRequest("There must be at least one resources or resources[$S] parameter.")
    for suffix, group in groups.items():
        if not group.resources and not version.at_least(36):
            orphans = sorted(f"{k}{suffix}" for k in group.keys)
            raise BadRequest(
                "All traits parameters must be associated with resources.  Found the following orphaned "
                f"traits keys: {', '.join(orphans)}" if "required" in group.keys else
                "All member_of parameters must be associated with resources.  Found the following "
                f"orphaned member_of keys: {', '.join(orphans)}"
            )

    group_policy = args.get("group_policy")
    if group_policy is not None and group_policy not in ("none", "isolate"):
        raise BadRequest(f"Invalid query string parameters: '{group_policy}' is not one of ['none', 'isolate']")
    if len([s for s in groups if s]) > 1 and group_policy is None:
        raise BadRequest('The "group_policy" parameter is required when specifying more than one '
                         '"resources{N}" parameter.')

    limit = None
    if "limit" in args:
        if not _LIMIT.match(args["limit"]):
            raise BadRequest(f"Invalid query string parameters: '{args['limit']}' does not match "
                             "'^[1-9][0-9]*$'")
        limit = int(args["limit"])

    root_traits = TraitFilter()
    if "root_required" in args:
        values = args.getlist("root_required")
        if len(values) > 1:
            raise BadRequest("Query parameter 'root_required' may be specified only once.")
        root_traits = parse_required(values, allow_forbidden=True, allow_any_of=False, param="root_required")
        _refuse_contradiction(root_traits, "root_required")

    same_subtree = []
    for value in args.getlist("same_subtree"):
        suffixes = value.split(",")
        unknown = [s for s in suffixes if s not in groups or not s]
        if unknown:
            raise BadRequest(f"Real suffixes should be specified in same_subtree: {value}")
        same_subtree.append(suffixes)
    return groups, group_policy, limit, root_traits, same_subtree


def _refuse_contradiction(traits: TraitFilter, param: str) -> None:
    required = {name for group in traits.groups if len(group) == 1 for name in group}
    both = sorted(required & set(traits.forbidden))
    if both:
        raise BadRequest(f"Conflicting required and forbidden traits found in the following traits "
                         f"keys: {param}: ({', '.join(both)})")


def _resolve(conn, groups, group_policy, root_traits, same_subtree) -> tuple[CandidateRequest, dict]:
    class_names = {rc for g in groups.values() for rc in g.resources}
    class_ids = names.resource_class_ids(conn, class_names)
    for name in sorted(class_names):
        if name not in class_ids:
            raise BadRequest(f"Invalid resource class in resources parameter: No such resource class {name}.")
    trait_names = set(root_traits.names())
    for g in groups.values():
        trait_names |= g.traits.names()
    trait_ids = names.require_trait_ids(conn, trait_names)
    agg_uuids = {u for g in groups.values() for grp in g.aggregates.groups for u in grp} | \
        {u for g in groups.values() for u in g.aggregates.forbidden}
    agg_ids = dict(conn.execute(
        sa.select(placement_aggregates.c.uuid, placement_aggregates.c.id)
        .where(placement_aggregates.c.uuid.in_(agg_uuids))).all()) if agg_uuids else {}

    request_groups = []
    for suffix, g in groups.items():
        group = RequestGroup(
            suffix=suffix,
            resources={class_ids[n]: a for n, a in g.resources.items()},
            required=[frozenset(trait_ids[n] for n in any_of) for any_of in g.traits.groups],
            forbidden=frozenset(trait_ids[n] for n in g.traits.forbidden),
            member_of=[frozenset(agg_ids[u] for u in any_of if u in agg_ids)
                       for any_of in g.aggregates.groups],
            forbidden_aggregates=frozenset(agg_ids[u] for u in g.aggregates.forbidden if u in agg_ids),
        )
        if g.in_tree is not None:
            tree = provider_store.get_provider(conn, g.in_tree)
            if tree is None:
                group.impossible = True
            else:
                group.in_tree_root = tree["root_provider_id"]
        request_groups.append(group)
    request = CandidateRequest(
        groups=request_groups,
        isolate=group_policy == "isolate",
        same_subtree=same_subtree,
        root_required=[frozenset(trait_ids[n] for n in any_of) for any_of in root_traits.groups],
        root_forbidden=frozenset(trait_ids[n] for n in root_traits.forbidden),
    )
    return request, class_ids


def list_allocation_candidates(call):
    groups, group_policy, limit, root_traits, same_subtree = parse_query(call)
    settings = call.settings

    def work(conn):
        request, class_ids = _resolve(conn, groups, group_policy, root_traits, same_subtree)
        finder = CandidateFinder(conn, request, limit=limit, max_candidates=settings.max_candidates,
                                 randomize=settings.randomize_candidates)
        candidates, providers = finder.find()
        return (candidates, providers, class_ids, names.resource_class_names(conn),
                _trait_names(conn, providers), _outside_uuids(conn, providers))

    candidates, providers, class_ids, rc_names, trait_names, outside = call.db.read(work)
    return json_response(call, _render(call, candidates, providers, class_ids, rc_names, trait_names, outside))


def explain_allocation_candidates(call):
    """Berth's extension: how many providers each condition of the request excluded."""
    groups, group_policy, limit, root_traits, same_subtree = parse_query(call)
    settings = call.settings

    def work(conn):
        request, class_ids = _resolve(conn, groups, group_policy, root_traits, same_subtree)
        trait_ids = {t for g in request.groups for s in g.required for t in s} | \
            {t for g in request.groups for t in g.forbidden} | \
            {t for s in request.root_required for t in s} | set(request.root_forbidden)
        agg_ids = {a for g in request.groups for s in g.member_of for a in s} | \
            {a for g in request.groups for a in g.forbidden_aggregates}
        report = explain(
            conn, request, class_names={v: k for k, v in class_ids.items()},
            trait_names=dict(conn.execute(sa.select(traits.c.id, traits.c.name)
                                          .where(traits.c.id.in_(trait_ids))).all()) if trait_ids else {},
            aggregate_uuids=dict(conn.execute(sa.select(placement_aggregates.c.id, placement_aggregates.c.uuid)
                                              .where(placement_aggregates.c.id.in_(agg_ids))).all())
            if agg_ids else {},
        )
        finder = CandidateFinder(conn, request, limit=limit, max_candidates=settings.max_candidates)
        candidates, _ = finder.find()
        report["candidates"] = len(candidates)
        report["candidates_capped_at"] = finder.want
        return report

    return json_response(call, call.db.read(work))


def _trait_names(conn, providers):
    ids = {t for p in providers.values() for t in p.traits}
    if not ids:
        return {}
    return dict(fetch(conn, "SELECT id, name FROM traits WHERE id IN {ids}", ids=ids))


def _outside_uuids(conn, providers):
    """Uuids of parents and roots that were not loaded (those of nested sharing providers)."""
    missing = {i for p in providers.values() for i in (p.parent_id, p.root_id)
               if i is not None and i not in providers}
    if not missing:
        return {}
    return dict(fetch(conn, "SELECT id, uuid FROM resource_providers WHERE id IN {ids}", ids=missing))


def _render(call, candidates, providers, class_ids, rc_names, trait_names, outside_uuids):
    version = call.version
    uuid_of = {**outside_uuids, **{pid: p.uuid for pid, p in providers.items()}}
    requests = []
    in_answers = set()
    for candidate in candidates:
        in_answers.update(candidate.allocations)
        for ids in candidate.mappings.values():
            in_answers.update(ids)
        if version.at_least(12):
            entry = {"allocations": {
                uuid_of[pid]: {"resources": {rc_names[rc]: amount for rc, amount in by_rc.items()}}
                for pid, by_rc in candidate.allocations.items()
            }}
        else:
            entry = {"allocations": [
                {"resource_provider": {"uuid": uuid_of[pid]},
                 "resources": {rc_names[rc]: amount for rc, amount in by_rc.items()}}
                for pid, by_rc in candidate.allocations.items()
            ]}
        if version.at_least(34):
            entry["mappings"] = {suffix: [uuid_of[pid] for pid in ids] for suffix, ids in candidate.mappings.items()}
        requests.append(entry)

    if version.at_least(29):
        roots = {providers[pid].root_id for pid in in_answers}
        summary_ids = {pid for pid, p in providers.items() if p.root_id in roots} | in_answers
    else:
        summary_ids = in_answers
    requested = set(class_ids.values())
    summaries = {}
    for pid in sorted(summary_ids):
        provider = providers[pid]
        resources = {}
        for rc, inv in provider.inventories.items():
            if version.at_least(27) or rc in requested:
                resources[rc_names[rc]] = {"capacity": capacity(inv.total, inv.reserved, inv.allocation_ratio),
                                           "used": inv.used}
        summary = {"resources": resources}
        if version.at_least(17):
            # In the order the traits were created, as the reference lists them.
            summary["traits"] = [trait_names[t] for t in sorted(provider.traits)]
        if version.at_least(29):
            summary["parent_provider_uuid"] = uuid_of.get(provider.parent_id)
            summary["root_provider_uuid"] = uuid_of[provider.root_id]
        summaries[provider.uuid] = summary
    return {"allocation_requests": requests, "provider_summaries": summaries}
