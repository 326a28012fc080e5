"""Feeding the candidate search: which trees to look at, in what order, and their data.

Trees are visited in batches in provider-id order.  A batch is chosen by a "driving" query: the
providers that have room for one requested resource class that no sharing provider offers (so every
answer must have it inside its own tree), read through the (provider, class) index with a LIMIT.
Only the trees of that batch are loaded and searched, and the walk stops as soon as ``limit``
candidates are found, so the cost of a limited request follows the limit, not the size of the cloud.
"""

from __future__ import annotations

import random
import threading
from collections import defaultdict

from berth.domain.candidates import (
    CandidateRequest,
    InventoryData,
    ProviderData,
    SearchBudget,
    TreeView,
    search,
)
from berth.domain.capacity import room_sql, units_sql
from berth.store import names
from berth.store.rawsql import fetch

SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"
MAX_BATCH = 4096
# Providers one process keeps copies of unless told otherwise.  About 3 KB each with the answer
# pieces kept with them (bench layout, by hand), so about 30 MB per worker when full: with three
# or four workers still inside the memory target at 100,000 hosts.  An unlimited request reads
# about 1,250 trees.
DEFAULT_CACHE_CAPACITY = 10_000


# Which providers a tree (or the set of sharing providers) holds now, and at which revision: enough
# to tell which copies in the process's cache are still current.
_MEMBER_FIELDS = "p.id, p.parent_provider_id, p.root_provider_id, p.revision"
_TREE_MEMBERS = "SELECT " + _MEMBER_FIELDS + " FROM resource_providers p WHERE p.root_provider_id IN {ids}"
_SHARING_MEMBERS = (
    "SELECT " + _MEMBER_FIELDS + " FROM resource_providers p WHERE p.id IN (SELECT rpt.resource_provider_id "
    "FROM resource_provider_traits rpt JOIN traits t ON t.id = rpt.trait_id WHERE t.name = ?)"
)
# PostgreSQL reads the same rows through the indexes, one lookup per root or provider, whatever its
# statistics say: right after a bulk load, before autovacuum's first ANALYZE, it planned plain joins
# as scans of every provider and inventory (9 ms for 64 trees of 10,000 instead of about 1).  ``OFFSET
# 0`` keeps each lookup a separate step that the planner cannot turn back into a join; the plan is
# then the same for any list, and stays prepared.
_TREE_MEMBERS_PG = (
    "SELECT " + _MEMBER_FIELDS + " FROM unnest(?::integer[]) AS r(id) "
    "JOIN LATERAL (SELECT * FROM resource_providers p WHERE p.root_provider_id = r.id OFFSET 0) p ON true"
)
# Where a batch's roots are dense in id order (the common case: the driving query walks providers in
# id order), one range scan of the root index instead: about 1 ms for 1,200 providers instead of 3.
# The rows of roots in the range but not in the batch are dropped.
_TREE_MEMBERS_RANGE_PG = (
    "SELECT " + _MEMBER_FIELDS + " FROM resource_providers p WHERE p.root_provider_id BETWEEN ? AND ?"
)
_SHARING_MEMBERS_PG = (
    "SELECT " + _MEMBER_FIELDS + " FROM (SELECT resource_provider_id FROM resource_provider_traits "
    "WHERE trait_id = ? OFFSET 0) s "
    "JOIN LATERAL (SELECT * FROM resource_providers p WHERE p.id = s.resource_provider_id OFFSET 0) p ON true"
)
# Whole providers, for those the cache has no current copy of: with their inventories in one statement
# (a provider without inventory comes once, with NULLs), then their traits and aggregates in another.
_PROVIDER_FIELDS = (
    "p.id, p.uuid, p.parent_provider_id, p.root_provider_id, i.resource_class_id, i.total, i.reserved, "
    "i.min_unit, i.max_unit, i.step_size, i.allocation_ratio, i.used, p.revision "
)
_PROVIDERS = (
    "SELECT " + _PROVIDER_FIELDS + "FROM resource_providers p LEFT JOIN inventories i "
    "ON i.resource_provider_id = p.id WHERE p.id IN {ids}"
)
_PROVIDERS_PG = (
    "SELECT " + _PROVIDER_FIELDS + "FROM unnest(?::integer[]) AS r(id) "
    "JOIN LATERAL (SELECT * FROM resource_providers p WHERE p.id = r.id OFFSET 0) p ON true "
    "LEFT JOIN LATERAL (SELECT * FROM inventories i WHERE i.resource_provider_id = p.id OFFSET 0) i ON true"
)
_TRAITS_AND_AGGREGATES_PG = (
    "SELECT 0, r.id, t.trait_id FROM unnest(?::integer[]) AS r(id) JOIN LATERAL "
    "(SELECT trait_id FROM resource_provider_traits t WHERE t.resource_provider_id = r.id OFFSET 0) t ON true "
    "UNION ALL SELECT 1, r.id, a.aggregate_id FROM unnest(?::integer[]) AS r(id) JOIN LATERAL "
    "(SELECT aggregate_id FROM resource_provider_aggregates a WHERE a.resource_provider_id = r.id OFFSET 0) a ON true"
)
# By provider id, so that SQLite reads them through the (provider, ...) indexes.
_TRAITS_AND_AGGREGATES = (
    "SELECT 0, resource_provider_id, trait_id FROM resource_provider_traits WHERE resource_provider_id IN {ids} "
    "UNION ALL "
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
    f"CASE WHEN {room_sql('i', '?')} AND {units_sql('i', '?')} THEN 1 ELSE 0 END "
    "FROM inventories i WHERE i.resource_class_id = ?"
)
_DRIVING_CURSOR = "i.resource_provider_id"
_DRIVING_IN_TREE = " AND i.resource_provider_id IN (SELECT id FROM resource_providers WHERE root_provider_id = ?)"
_ROOTS_SQL = "SELECT p.id, p.root_provider_id, 1 FROM resource_providers p WHERE p.id = p.root_provider_id"
_ROOTS_CURSOR = "p.id"
_ROOTS_IN_TREE = " AND p.root_provider_id = ?"


def _provider_id(provider: ProviderData) -> int:
    return provider.id


def _providers_from(rows) -> tuple[dict[int, ProviderData], dict[int, int]]:
    providers: dict[int, ProviderData] = {}
    revisions: dict[int, int] = {}
    get = providers.get
    # Indexing, not star-unpacking: a cold cache turns thousands of rows into objects here.
    for row in rows:
        provider = get(row[0])
        if provider is None:
            provider = providers[row[0]] = ProviderData(row[0], row[1], row[2], row[3])
            revisions[row[0]] = row[12]
        if row[4] is not None:
            provider.inventories[row[4]] = InventoryData(row[5], row[6], row[7], row[8], row[9], row[10], row[11])
    return providers, revisions


def _load_providers(conn, ids: list[int]) -> tuple[dict[int, ProviderData], dict[int, int]]:
    """These providers with their inventories, traits and aggregates, and the revision they are at."""
    postgres = conn.dialect.name == "postgresql"
    if postgres:
        providers, revisions = _providers_from(fetch(conn, _PROVIDERS_PG, (ids,)))
    else:
        providers, revisions = _providers_from(fetch(conn, _PROVIDERS, ids=ids))
    if not providers:
        return providers, revisions
    found_ids = list(providers)
    if postgres:
        rows = fetch(conn, _TRAITS_AND_AGGREGATES_PG, (found_ids, found_ids))
    else:
        rows = fetch(conn, _TRAITS_AND_AGGREGATES, ids=found_ids)
    found = (defaultdict(set), defaultdict(set))
    for kind, provider_id, value in rows:
        found[kind][provider_id].add(value)
    for provider_id, trait_set in found[0].items():
        providers[provider_id].traits = frozenset(trait_set)
    for provider_id, agg_set in found[1].items():
        providers[provider_id].aggregates = frozenset(agg_set)
    return providers, revisions


class ProviderCache:
    """Providers as the candidate search sees them, kept by one process from request to request.

    Loading whole trees was most of an unlimited candidate request: thousands of inventory rows
    turned into Python values and objects.  Each copy here is a provider as it was at one revision
    of its row, and every write that changes what the search sees (inventories, usage, traits,
    aggregates, parent) moves the revision on in the same transaction.  A request reads only the
    ids, parents, roots and revisions of the providers it needs, and loads whole only those whose
    copy is missing or no longer current, so what it sees is what the database holds, as without
    the cache.  Copies are never changed once made (the search only reads them), so that requests
    on several threads can share them.  Past ``capacity`` providers the oldest copies are dropped.
    """

    def __init__(self, capacity: int = DEFAULT_CACHE_CAPACITY):
        self.capacity = capacity
        self._copies: dict[int, tuple[int, ProviderData]] = {}
        self._lock = threading.Lock()

    def __len__(self):
        return len(self._copies)

    def providers(self, conn, members) -> dict[int, ProviderData]:
        """The providers of these ``(id, parent id, root id, revision)`` rows, current."""
        copies = self._copies
        found: dict[int, ProviderData] = {}
        stale = []
        for provider_id, parent_id, root_id, revision in members:
            copy = copies.get(provider_id)
            # The parent and root are compared too, although moving a provider changes its revision:
            # a tree built from a copy of another shape would be wrong in ways no check would see.
            if (
                copy is not None
                and copy[0] == revision
                and copy[1].root_id == root_id
                and copy[1].parent_id == parent_id
            ):
                found[provider_id] = copy[1]
            else:
                stale.append(provider_id)
        if stale:
            loaded, revisions = _load_providers(conn, stale)
            found.update(loaded)
            if self.capacity:
                with self._lock:
                    for provider_id, provider in loaded.items():
                        copies.pop(provider_id, None)
                        copies[provider_id] = (revisions[provider_id], provider)
                    while len(copies) > self.capacity:
                        del copies[next(iter(copies))]
        return found


def _sharing_providers(conn, cache: ProviderCache) -> dict[int, ProviderData]:
    if conn.dialect.name == "postgresql":
        trait_id = names.trait_ids(conn, [SHARING_TRAIT]).get(SHARING_TRAIT)
        members = fetch(conn, _SHARING_MEMBERS_PG, (trait_id,)) if trait_id else []
    else:
        members = fetch(conn, _SHARING_MEMBERS, (SHARING_TRAIT,))
    return cache.providers(conn, members) if members else {}


class CandidateFinder:
    def __init__(
        self,
        conn,
        request: CandidateRequest,
        cache: ProviderCache,
        *,
        limit: int | None,
        max_candidates: int,
        randomize: bool = False,
        max_steps: int = 200_000,
    ):
        self.conn = conn
        self.request = request
        self.cache = cache
        self.randomize = randomize
        self.want = min(limit, max_candidates) if limit is not None else max_candidates
        self.budget = SearchBudget(max_steps)
        self.sharing = _sharing_providers(conn, cache)
        self.sharing_by_aggregate: dict[int, list[ProviderData]] = defaultdict(list)
        for provider in self.sharing.values():
            for aggregate in provider.aggregates:
                self.sharing_by_aggregate[aggregate].append(provider)
        self.providers: dict[int, ProviderData] = {}

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
            g.required or g.forbidden or g.member_of or g.forbidden_aggregates for g in request.groups
        )

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
            bounded = (
                sql
                + (f" AND {column} < ?" if upper is not None else "")
                + f" AND {column} > ? ORDER BY {column} LIMIT ?"
            )
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
        if self.conn.dialect.name == "postgresql":
            lowest, highest = min(root_ids), max(root_ids)
            if highest - lowest < 2 * len(root_ids):
                wanted = set(root_ids)
                rows = [row for row in fetch(self.conn, _TREE_MEMBERS_RANGE_PG, (lowest, highest)) if row[2] in wanted]
            else:
                rows = fetch(self.conn, _TREE_MEMBERS_PG, (root_ids,))
        else:
            rows = fetch(self.conn, _TREE_MEMBERS, ids=root_ids)
        members = self.cache.providers(self.conn, rows)
        self.providers.update(members)
        by_root = defaultdict(list)
        for provider in members.values():
            by_root[provider.root_id].append(provider)
        trees = []
        for root_id in root_ids:
            tree_members = by_root.get(root_id)
            # No root: deleted since the driving query read it.
            if not tree_members or root_id not in members:
                continue
            if len(tree_members) > 1:
                tree_members.sort(key=_provider_id)
            anchored = []
            if self.sharing and any(p.aggregates for p in tree_members):
                # Through the aggregate index: a large cloud has hundreds of sharing providers.
                anchored_ids = {
                    s.id
                    for p in tree_members
                    for a in p.aggregates
                    for s in self.sharing_by_aggregate.get(a, ())
                    if s.root_id != root_id
                }
                if anchored_ids:
                    anchored = sorted((s for s in self.sharing.values() if s.id in anchored_ids), key=_provider_id)
            trees.append(TreeView(members[root_id], tree_members, anchored))
        return trees

    def find(self):
        """Candidates (in order) and every provider loaded for them."""
        results = []
        seen = set()
        for roots in self._root_batches():
            found = search(
                self._trees(roots),
                self.request,
                limit=self.want - len(results),
                budget=self.budget,
                seen=seen,
                sharing_ids=frozenset(self.sharing),
            )
            results.extend(found)
            if len(results) >= self.want or self.budget.remaining < 0:
                break
        for provider in self.sharing.values():
            self.providers.setdefault(provider.id, provider)
        if self.randomize:
            random.shuffle(results)
        return results, self.providers
