"""Feeding the candidate search: which trees to look at, in what order, and their data.

Trees are visited in batches in provider-id order.  A batch is chosen by a "driving" query: the
providers that have room for one requested resource class that no sharing provider offers (so every
answer must have it inside its own tree), read through the (provider, class) index with a LIMIT.
Only the trees of that batch are loaded and searched, and the walk stops as soon as ``limit``
candidates are found, so the cost of a limited request follows the limit, not the size of the cloud.
"""
from __future__ import annotations

import random
from collections import defaultdict

from berth.domain.candidates import (
    CandidateRequest, InventoryData, ProviderData, SearchBudget, TreeView, search,
)
from berth.store import names
from berth.store.rawsql import fetch

SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"
MAX_BATCH = 4096


# Providers with their inventories in one statement (a provider without inventory comes once, with
# NULLs), then their traits and aggregates in another: each round trip costs more than the rows.
_PROVIDER_FIELDS = (
    "p.id, p.uuid, p.parent_provider_id, p.root_provider_id, i.resource_class_id, i.total, i.reserved, "
    "i.min_unit, i.max_unit, i.step_size, i.allocation_ratio, i.used "
)
_PROVIDER_COLUMNS = _PROVIDER_FIELDS + "FROM resource_providers p LEFT JOIN inventories i ON i.resource_provider_id = p.id "
_PROVIDERS_OF_TREES = "SELECT " + _PROVIDER_COLUMNS + "WHERE p.root_provider_id IN {ids}"
_PROVIDERS = "SELECT " + _PROVIDER_COLUMNS + "WHERE p.id IN {ids}"
_SHARING_PROVIDERS = (
    "SELECT " + _PROVIDER_COLUMNS + "WHERE p.id IN (SELECT rpt.resource_provider_id FROM resource_provider_traits rpt "
    "JOIN traits t ON t.id = rpt.trait_id WHERE t.name = ?)"
)
# PostgreSQL reads the same rows tree by tree through the indexes, whatever its statistics say:
# right after a bulk load, before autovacuum's first ANALYZE, it planned the joins above as scans of
# every provider and inventory (9 ms for 64 trees of 10,000 instead of about 1).  ``OFFSET 0`` keeps
# each lookup a separate step that the planner cannot turn back into a join; the plan is then the
# same for any list, and stays prepared.
_PROVIDERS_OF_TREES_PG = (
    "SELECT " + _PROVIDER_FIELDS + "FROM unnest(?::integer[]) AS r(id) "
    "JOIN LATERAL (SELECT * FROM resource_providers p WHERE p.root_provider_id = r.id OFFSET 0) p ON true "
    "LEFT JOIN LATERAL (SELECT * FROM inventories i WHERE i.resource_provider_id = p.id OFFSET 0) i ON true"
)
_SHARING_PROVIDERS_PG = (
    "SELECT " + _PROVIDER_FIELDS + "FROM (SELECT resource_provider_id FROM resource_provider_traits WHERE trait_id = ? OFFSET 0) s "
    "JOIN LATERAL (SELECT * FROM resource_providers p WHERE p.id = s.resource_provider_id OFFSET 0) p ON true "
    "LEFT JOIN LATERAL (SELECT * FROM inventories i WHERE i.resource_provider_id = p.id OFFSET 0) i ON true"
)
_TRAITS_PG = (
    "SELECT 0, r.id, t.trait_id FROM unnest(?::integer[]) AS r(id) JOIN LATERAL "
    "(SELECT trait_id FROM resource_provider_traits t WHERE t.resource_provider_id = r.id OFFSET 0) t ON true"
)
_TRAITS_AND_AGGREGATES_PG = (
    _TRAITS_PG + " UNION ALL SELECT 1, r.id, a.aggregate_id FROM unnest(?::integer[]) AS r(id) JOIN LATERAL "
    "(SELECT aggregate_id FROM resource_provider_aggregates a WHERE a.resource_provider_id = r.id OFFSET 0) a ON true"
)
# By provider id, so that both databases read them through the (provider, ...) indexes.
_TRAITS = "SELECT 0, resource_provider_id, trait_id FROM resource_provider_traits WHERE resource_provider_id IN {ids}"
_TRAITS_AND_AGGREGATES = (
    _TRAITS + " UNION ALL "
    "SELECT 1, resource_provider_id, aggregate_id FROM resource_provider_aggregates WHERE resource_provider_id IN {ids}"
)
# The providers of one class in provider order, through the (class, provider) index, with whether
# each has room: the room test stays out of the WHERE clause so that no planner mistakes it for a
# selective filter and sorts the whole class instead of stopping at the LIMIT.  The root comes from
# a lookup by primary key for each row read, not from a join: without statistics (a freshly loaded
# database, before autovacuum's first analyse) PostgreSQL planned the join as a scan of every
# provider for each inventory row, 24 ms for 1,000 rows instead of 3.6.
_DRIVING_SQL = (
    "SELECT i.resource_provider_id, "
    "(SELECT p.root_provider_id FROM resource_providers p WHERE p.id = i.resource_provider_id), "
    "CASE WHEN (i.total - i.reserved) * i.allocation_ratio >= i.used + ? "
    "AND i.min_unit <= ? AND i.max_unit >= ? AND ? % i.step_size = 0 THEN 1 ELSE 0 END "
    "FROM inventories i WHERE i.resource_class_id = ?"
)
_DRIVING_CURSOR = "i.resource_provider_id"
_DRIVING_IN_TREE = " AND i.resource_provider_id IN (SELECT id FROM resource_providers WHERE root_provider_id = ?)"
_ROOTS_SQL = "SELECT p.id, p.root_provider_id, 1 FROM resource_providers p WHERE p.id = p.root_provider_id"
_ROOTS_CURSOR = "p.id"
_ROOTS_IN_TREE = " AND p.root_provider_id = ?"


def _provider_id(provider: ProviderData) -> int:
    return provider.id


def _providers_from(rows) -> dict[int, ProviderData]:
    providers: dict[int, ProviderData] = {}
    get = providers.get
    # Indexing, not star-unpacking: an unlimited request turns thousands of rows into objects here.
    for row in rows:
        provider = get(row[0])
        if provider is None:
            provider = providers[row[0]] = ProviderData(row[0], row[1], row[2], row[3])
        if row[4] is not None:
            provider.inventories[row[4]] = InventoryData(row[5], row[6], row[7], row[8], row[9], row[10], row[11])
    return providers


def _add_traits_and_aggregates(conn, providers: dict[int, ProviderData], with_aggregates: bool) -> None:
    if conn.dialect.name == "postgresql":
        ids = list(providers)
        rows = fetch(conn, _TRAITS_AND_AGGREGATES_PG, (ids, ids)) if with_aggregates else \
            fetch(conn, _TRAITS_PG, (ids,))
    else:
        rows = fetch(conn, _TRAITS_AND_AGGREGATES if with_aggregates else _TRAITS, ids=list(providers))
    found = (defaultdict(set), defaultdict(set))
    for kind, provider_id, value in rows:
        found[kind][provider_id].add(value)
    for provider_id, trait_set in found[0].items():
        providers[provider_id].traits = frozenset(trait_set)
    for provider_id, agg_set in found[1].items():
        providers[provider_id].aggregates = frozenset(agg_set)


def _load_providers(conn, ids, *, by_root: bool, with_aggregates: bool) -> dict[int, ProviderData]:
    """Providers (and their inventories, traits, aggregates) of the trees rooted at ``ids``, or of
    the providers ``ids`` themselves."""
    if by_root and conn.dialect.name == "postgresql":
        providers = _providers_from(fetch(conn, _PROVIDERS_OF_TREES_PG, (list(ids),)))
    else:
        providers = _providers_from(fetch(conn, _PROVIDERS_OF_TREES if by_root else _PROVIDERS, ids=ids))
    if providers:
        _add_traits_and_aggregates(conn, providers, with_aggregates)
    return providers


def _sharing_providers(conn) -> dict[int, ProviderData]:
    if conn.dialect.name == "postgresql":
        trait_id = names.trait_ids(conn, [SHARING_TRAIT]).get(SHARING_TRAIT)
        providers = _providers_from(fetch(conn, _SHARING_PROVIDERS_PG, (trait_id,))) if trait_id else {}
    else:
        providers = _providers_from(fetch(conn, _SHARING_PROVIDERS, (SHARING_TRAIT,)))
    if providers:
        _add_traits_and_aggregates(conn, providers, with_aggregates=True)
    return providers


class CandidateFinder:
    def __init__(self, conn, request: CandidateRequest, *, limit: int | None, max_candidates: int,
                 randomize: bool = False, max_steps: int = 200_000):
        self.conn = conn
        self.request = request
        self.randomize = randomize
        self.want = min(limit, max_candidates) if limit is not None else max_candidates
        self.budget = SearchBudget(max_steps)
        self.sharing = _sharing_providers(conn)
        self.sharing_by_aggregate: dict[int, list[ProviderData]] = defaultdict(list)
        for provider in self.sharing.values():
            for aggregate in provider.aggregates:
                self.sharing_by_aggregate[aggregate].append(provider)
        self.providers: dict[int, ProviderData] = {}
        # Aggregates matter only to member_of filters and to sharing providers.
        self.need_aggregates = bool(self.sharing) or any(
            g.member_of or g.forbidden_aggregates for g in request.groups)

    def _driving_class(self):
        """A (class, amount) every answer's tree must hold itself: one no sharing provider offers.

        Classes asked for by suffixed groups (devices, bandwidth) come first, since fewer trees
        have them than have the compute classes asked for by the unsuffixed group.
        """
        shared_classes = {rc for p in self.sharing.values() for rc in p.inventories}
        choices = [(rc, amount) for group in self.request.suffixed for rc, amount in group.resources.items()]
        if self.request.unsuffixed is not None:
            choices += list(self.request.unsuffixed.resources.items())
        return next(((rc, amount) for rc, amount in choices if rc not in shared_classes), None)

    def _tree_restriction(self):
        roots = {g.in_tree_root for g in self.request.groups if g.in_tree_root is not None}
        if len(roots) == 1 and not self.sharing:
            return roots.pop()
        return None

    def _filters_beyond_room(self) -> bool:
        request = self.request
        return bool(request.root_required or request.root_forbidden) or any(
            g.required or g.forbidden or g.member_of or g.forbidden_aggregates for g in request.groups)

    def _root_batches(self):
        driving = self._driving_class()
        tree = self._tree_restriction()
        start = 0
        if self.randomize:
            highest = fetch(self.conn, "SELECT MAX(id) FROM resource_providers")[0][0] or 0
            start = random.randint(0, highest)
        if driving is not None:
            rc, amount = driving
            sql, column, in_tree = _DRIVING_SQL, _DRIVING_CURSOR, _DRIVING_IN_TREE
            fixed = [amount, amount, amount, amount, rc]
        else:
            sql, column, in_tree = _ROOTS_SQL, _ROOTS_CURSOR, _ROOTS_IN_TREE
            fixed = []
        if tree is not None:
            sql += in_tree
            fixed.append(tree)
        seen_roots: set[int] = set()
        for lower, upper in ((start, None), (0, start + 1)) if start else ((0, None),):
            # Most trees in a healthy cloud fit, so the first batch is about what was asked for;
            # twice that when traits or aggregates, which the driving query does not test, also
            # have to match, rather than a second round of statements.
            first = self.want + self.want // 4 + 2
            cursor, batch = lower, min(first * 2 if self._filters_beyond_room() else first, MAX_BATCH)
            bounded = (sql + (f" AND {column} < ?" if upper is not None else "")
                       + f" AND {column} > ? ORDER BY {column} LIMIT ?")
            while True:
                params = fixed + ([upper] if upper is not None else []) + [cursor, batch]
                rows = fetch(self.conn, bounded, params)
                if not rows:
                    break
                cursor = rows[-1][0]
                roots = []
                for _, root_id, fits in rows:
                    if fits and root_id not in seen_roots:
                        seen_roots.add(root_id)
                        roots.append(root_id)
                if roots:
                    yield roots
                if len(rows) < batch:
                    break
                batch = min(batch * 2, MAX_BATCH)

    def _trees(self, root_ids: list[int]) -> list[TreeView]:
        members = _load_providers(self.conn, root_ids, by_root=True, with_aggregates=self.need_aggregates)
        self.providers.update(members)
        by_root = defaultdict(list)
        for provider in members.values():
            by_root[provider.root_id].append(provider)
        trees = []
        for root_id in root_ids:
            tree_members = by_root.get(root_id)
            if not tree_members:
                continue
            if len(tree_members) > 1:
                tree_members.sort(key=_provider_id)
            anchored = []
            if self.sharing and any(p.aggregates for p in tree_members):
                # Through the aggregate index: a large cloud has hundreds of sharing providers.
                anchored_ids = {s.id for p in tree_members for a in p.aggregates
                                for s in self.sharing_by_aggregate.get(a, ()) if s.root_id != root_id}
                if anchored_ids:
                    anchored = [s for s in self.sharing.values() if s.id in anchored_ids]
            trees.append(TreeView(members[root_id], tree_members, anchored))
        return trees

    def find(self):
        """Candidates (in order) and every provider loaded for them."""
        results = []
        seen = set()
        for roots in self._root_batches():
            found = search(self._trees(roots), self.request, limit=self.want - len(results),
                           budget=self.budget, seen=seen, sharing_ids=frozenset(self.sharing))
            results.extend(found)
            if len(results) >= self.want or self.budget.remaining < 0:
                break
        for provider in self.sharing.values():
            self.providers.setdefault(provider.id, provider)
        if self.randomize:
            random.shuffle(results)
        return results, self.providers
