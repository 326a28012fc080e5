"""GET /allocation_candidates: where could this request go?"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import sqlalchemy as sa

from berth.api import schemas
from berth.api.query import AggregateFilter, TraitFilter, parse_member_of, parse_required, parse_resources
from berth.api.responses import json_response
from berth.api.validation import is_uuid, normalize_uuid, query_schema_check
from berth.domain import error_codes
from berth.domain.candidates import CandidateRequest, RequestGroup
from berth.domain.errors import BadRequest
from berth.store import names
from berth.store import providers as provider_store
from berth.store.candidates import CandidateFinder
from berth.store.explain import explain
from berth.store.rawsql import fetch
from berth.store.schema import placement_aggregates, traits

GROUP_KEYS = ("resources", "required", "member_of", "in_tree")


@dataclass
class ParsedGroup:
    suffix: str
    resources: dict[str, int] = field(default_factory=dict)
    traits: TraitFilter = field(default_factory=TraitFilter)
    aggregates: AggregateFilter = field(default_factory=AggregateFilter)
    in_tree: str | None = None
    keys: set = field(default_factory=set)


def _suffix_of(key: str):
    """The group key and suffix a (schema-valid) query key names, or (None, None)."""
    for base in GROUP_KEYS:
        if key.startswith(base):
            return base, key[len(base) :]
    return None, None


def parse_query(call):
    """The request groups and options of the query string, names not yet resolved to ids."""
    args, version = call.args, call.version
    query_schema_check(args, schemas.allocation_candidates_query_schema(version))
    groups: dict[str, ParsedGroup] = {}
    for key in args:
        base, suffix = _suffix_of(key)
        if base is None:
            continue
        group = groups.setdefault(suffix, ParsedGroup(suffix))
        group.keys.add(base)
        values = args.getlist(key)
        if base == "resources":
            group.resources = parse_resources(values[-1])
        elif base == "required":
            if not version.at_least(39):
                values = values[-1:]
            group.traits = parse_required(
                values, allow_forbidden=version.at_least(22), allow_any_of=version.at_least(39), param=key
            )
            _refuse_contradiction(group.traits, key)
        elif base == "member_of":
            if len(values) > 1 and not version.at_least(24):
                raise BadRequest("Multiple member_of parameters are not supported")
            group.aggregates = parse_member_of(values, allow_forbidden=version.at_least(32))
        elif base == "in_tree":
            if not is_uuid(values[-1]):
                raise BadRequest(
                    f"Invalid query string parameters: Expected 'in_tree' parameter to be a "
                    f"format of uuid. Got: {values[-1]}"
                )
            group.in_tree = normalize_uuid(values[-1])
    _check_groups(groups, version)

    group_policy = args.get("group_policy")
    if len([s for s, g in groups.items() if s and g.resources]) > 1 and group_policy is None:
        raise BadRequest(
            'The "group_policy" parameter is required when specifying more than one "resources{N}" parameter.'
        )
    limit = int(args["limit"]) if "limit" in args else None

    root_traits = TraitFilter()
    if "root_required" in args:
        values = args.getlist("root_required")
        if len(values) > 1:
            raise BadRequest(
                "Query parameter 'root_required' may be specified only once.", code=error_codes.QUERY_DUPLICATE_KEY
            )
        root_traits = parse_required(values, allow_forbidden=True, allow_any_of=False, param="root_required")
        both = sorted({n for g in root_traits.groups for n in g} & set(root_traits.forbidden))
        if both:
            raise BadRequest(
                f"Conflicting required and forbidden traits found in root_required: {', '.join(both)}",
                code=error_codes.QUERY_BAD_VALUE,
            )

    same_subtree = [[s.strip() for s in value.split(",")] for value in args.getlist("same_subtree")]
    named = {s for suffixes in same_subtree for s in suffixes}
    if "" in named:
        raise BadRequest(
            "Empty string (unsuffixed group) can not be specified in `same_subtree` ", code=error_codes.QUERY_BAD_VALUE
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
    return groups, group_policy, limit, root_traits, same_subtree


def _check_groups(groups, version) -> None:
    """Every group needs resources before 1.36; at least one group does from then on."""
    if not groups:
        raise BadRequest("At least one request group (`resources` or `resources{$S}`) is required.")
    if version.at_least(36):
        if not any(g.resources for g in groups.values()):
            raise BadRequest(
                "There must be at least one resources or resources[$S] parameter.", code=error_codes.QUERY_MISSING_VALUE
            )
        return
    orphans = {"required": [], "member_of": []}
    for suffix, group in groups.items():
        if not group.resources:
            for key in ("required", "member_of"):
                if key in group.keys:
                    orphans[key].append(f"{key}{suffix}")
    if orphans["required"]:
        raise BadRequest(
            "All traits parameters must be associated with resources.  Found the following "
            f"orphaned traits keys: {', '.join(sorted(orphans['required']))}"
        )
    if orphans["member_of"]:
        raise BadRequest(
            "All member_of parameters must be associated with resources. Found the following "
            f"orphaned member_of keys: {', '.join(sorted(orphans['member_of']))}"
        )
    if any(not g.resources for g in groups.values()):
        raise BadRequest("All request groups must specify resources.")


def _refuse_contradiction(traits: TraitFilter, param: str) -> None:
    required = {name for group in traits.groups if len(group) == 1 for name in group}
    both = sorted(required & set(traits.forbidden))
    if both:
        raise BadRequest(
            f"Conflicting required and forbidden traits found in the following traits "
            f"keys: {param}: ({', '.join(both)})"
        )


def _resolve(conn, version, groups, group_policy, root_traits, same_subtree) -> tuple[CandidateRequest, dict]:
    class_names = {rc for g in groups.values() for rc in g.resources}
    class_ids = names.resource_class_ids(conn, class_names)
    for name in sorted(class_names):
        if name not in class_ids:
            raise BadRequest(f"Invalid resource class in resources parameter: No such resource class {name}.")
    trait_names = set(root_traits.names())
    for g in groups.values():
        trait_names |= g.traits.names()
    trait_ids = names.require_trait_ids(conn, trait_names)
    agg_uuids = {u for g in groups.values() for grp in g.aggregates.groups for u in grp} | {
        u for g in groups.values() for u in g.aggregates.forbidden
    }
    agg_ids = (
        dict(
            conn.execute(
                sa.select(placement_aggregates.c.uuid, placement_aggregates.c.id).where(
                    placement_aggregates.c.uuid.in_(agg_uuids)
                )
            ).all()
        )
        if agg_uuids
        else {}
    )

    request_groups = []
    for suffix, g in groups.items():
        group = RequestGroup(
            suffix=suffix,
            resources={class_ids[n]: a for n, a in g.resources.items()},
            required=[frozenset(trait_ids[n] for n in any_of) for any_of in g.traits.groups],
            forbidden=frozenset(trait_ids[n] for n in g.traits.forbidden),
            member_of=[frozenset(agg_ids[u] for u in any_of if u in agg_ids) for any_of in g.aggregates.groups],
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
        one_provider_per_tree=not version.at_least(29),
    )
    return request, class_ids


def list_allocation_candidates(call):
    groups, group_policy, limit, root_traits, same_subtree = parse_query(call)
    settings = call.settings

    def work(conn):
        request, class_ids = _resolve(conn, call.version, groups, group_policy, root_traits, same_subtree)
        finder = CandidateFinder(
            conn,
            request,
            call.provider_cache,
            limit=limit,
            max_candidates=settings.max_candidates,
            randomize=settings.randomize_candidates,
        )
        candidates, providers = finder.find()
        rc_names = names.resource_class_names_of(
            conn, {rc for p in providers.values() for rc in p.inventories} | set(class_ids.values())
        )
        # Rendered here, with the connection at hand: trait names and the uuids of parents outside
        # the answer are read only if some piece of it is not already kept with its provider.
        return _render(call, _Lookups(conn, providers), candidates, providers, class_ids, rc_names)

    return json_response(call, call.db.read(work))


def explain_allocation_candidates(call):
    """Berth's extension: how many providers each condition of the request excluded."""
    groups, group_policy, limit, root_traits, same_subtree = parse_query(call)
    settings = call.settings

    def work(conn):
        request, class_ids = _resolve(conn, call.version, groups, group_policy, root_traits, same_subtree)
        trait_ids = (
            {t for g in request.groups for s in g.required for t in s}
            | {t for g in request.groups for t in g.forbidden}
            | {t for s in request.root_required for t in s}
            | set(request.root_forbidden)
        )
        agg_ids = {a for g in request.groups for s in g.member_of for a in s} | {
            a for g in request.groups for a in g.forbidden_aggregates
        }
        report = explain(
            conn,
            request,
            class_names={v: k for k, v in class_ids.items()},
            trait_names=dict(
                conn.execute(sa.select(traits.c.id, traits.c.name).where(traits.c.id.in_(trait_ids))).all()
            )
            if trait_ids
            else {},
            aggregate_uuids=dict(
                conn.execute(
                    sa.select(placement_aggregates.c.id, placement_aggregates.c.uuid).where(
                        placement_aggregates.c.id.in_(agg_ids)
                    )
                ).all()
            )
            if agg_ids
            else {},
        )
        finder = CandidateFinder(
            conn, request, call.provider_cache, limit=limit, max_candidates=settings.max_candidates
        )
        candidates, _ = finder.find()
        report["candidates"] = len(candidates)
        report["candidates_capped_at"] = finder.want
        return report

    return json_response(call, call.db.read(work))


class _Lookups:
    """Names and uuids an answer may need, read from the database on first use only."""

    def __init__(self, conn, providers):
        self.conn = conn
        self.providers = providers

    @cached_property
    def uuid_of(self) -> dict[int, str]:
        providers = self.providers
        uuids = {pid: p.uuid for pid, p in providers.items()}
        # Parents and roots that were not loaded: those of nested sharing providers.
        missing = {
            i for p in providers.values() for i in (p.parent_id, p.root_id) if i is not None and i not in providers
        }
        if missing:
            uuids.update(fetch(self.conn, "SELECT id, uuid FROM resource_providers WHERE id IN {ids}", ids=missing))
        return uuids

    @cached_property
    def trait_names(self) -> dict[int, str]:
        return names.trait_names_of(self.conn, {t for p in self.providers.values() for t in p.traits})


# Pieces of answers kept with one provider's copy: answer shapes (microversion, custom class
# names), and within a shape of allocation requests, the distinct amounts asked.
MOST_SHAPES_PER_PROVIDER = 8
MOST_PIECES_PER_PROVIDER = 8


def _keep(derived: dict, shape: str, value):
    """Keep ``value`` under a new shape with a provider's copy, dropping all it kept if that holds
    too many shapes already."""
    if len(derived) >= MOST_SHAPES_PER_PROVIDER:
        derived.clear()
    derived[shape] = value
    return value


def _render(call, lookups: _Lookups, candidates, providers, class_ids, rc_names):
    version = call.version
    dict_format, with_mappings = version.at_least(12), version.at_least(34)
    all_classes, with_traits, with_tree = version.at_least(27), version.at_least(17), version.at_least(29)
    # Standard names never change and trait names cannot, but a custom class can be renamed (before
    # 1.7): pieces kept with a provider from one request to the next are kept per set of these names.
    custom_names = tuple(sorted((rc, name) for rc, name in rc_names.items() if name.startswith("CUSTOM_")))
    # Most answers place the same amounts: each distinct set is named once and its dict shared.
    named_resources: dict[tuple, dict] = {}

    def resources_of(by_rc):
        key = tuple(by_rc.items())
        named = named_resources.get(key)
        if named is None:
            named = named_resources[key] = {rc_names[rc]: amount for rc, amount in key}
        return named

    def request_of(candidate):
        allocations = candidate.allocations
        uuid_of = lookups.uuid_of
        if dict_format:
            entry = {
                "allocations": {uuid_of[pid]: {"resources": resources_of(by_rc)} for pid, by_rc in allocations.items()}
            }
        else:
            entry = {
                "allocations": [
                    {"resource_provider": {"uuid": uuid_of[pid]}, "resources": resources_of(by_rc)}
                    for pid, by_rc in allocations.items()
                ]
            }
        if with_mappings:
            entry["mappings"] = {suffix: [uuid_of[pid] for pid in ids] for suffix, ids in candidate.mappings.items()}
        return entry

    # Keys of the pieces kept with each provider's copy: strings, whose hashes Python keeps.
    request_shape = f"requests {dict_format:d}{with_mappings:d} {custom_names}"
    summary_shape = f"summary {with_traits:d}{with_tree:d} {custom_names}"

    requests = []
    in_answers = set()
    for candidate in candidates:
        allocations = candidate.allocations
        mappings = candidate.mappings
        if len(allocations) == 1 and len(mappings) == 1:
            [(pid, by_rc)] = allocations.items()
            [(suffix, ids)] = mappings.items()
            if len(ids) == 1 and ids[0] == pid:
                # The commonest answer, everything on one provider: the same entry serves every
                # request that places the same amounts there, as long as the provider's copy is current.
                in_answers.add(pid)
                derived = providers[pid].derived
                pieces = derived.get(request_shape)
                if pieces is None:
                    pieces = _keep(derived, request_shape, {})
                key = (suffix, *by_rc.items())
                entry = pieces.get(key)
                if entry is None:
                    if len(pieces) >= MOST_PIECES_PER_PROVIDER:
                        pieces.clear()  # requests of ever new amounts must not grow the copies without end
                    entry = pieces[key] = request_of(candidate)
                requests.append(entry)
                continue
        in_answers.update(allocations)
        for ids in mappings.values():
            in_answers.update(ids)
        requests.append(request_of(candidate))

    if with_tree:
        roots = {providers[pid].root_id for pid in in_answers}
        summary_ids = {pid for pid, p in providers.items() if p.root_id in roots} | in_answers
    else:
        summary_ids = in_answers
    requested = set(class_ids.values())
    # Many providers carry the same set of traits: each set is named and ordered once.
    named_traits: dict[frozenset, list[str]] = {}
    summaries = {}
    for pid in sorted(summary_ids):
        provider = providers[pid]
        if all_classes:
            # A summary then depends on the provider alone: made once per copy of it.
            summary = provider.derived.get(summary_shape)
            if summary is not None:
                summaries[provider.uuid] = summary
                continue
        resources = {}
        for rc, inv in provider.inventories.items():
            if all_classes or rc in requested:
                resources[rc_names[rc]] = {"capacity": inv.capacity, "used": inv.used}
        summary = {"resources": resources}
        if with_traits:
            # In the order the traits were created, as the reference lists them.
            names_of_set = named_traits.get(provider.traits)
            if names_of_set is None:
                trait_names = lookups.trait_names
                names_of_set = named_traits[provider.traits] = [trait_names[t] for t in sorted(provider.traits)]
            summary["traits"] = names_of_set
        if with_tree:
            uuid_of = lookups.uuid_of
            summary["parent_provider_uuid"] = uuid_of.get(provider.parent_id)
            summary["root_provider_uuid"] = uuid_of[provider.root_id]
        if all_classes:
            _keep(provider.derived, summary_shape, summary)
        summaries[provider.uuid] = summary
    return {"allocation_requests": requests, "provider_summaries": summaries}
