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

import sqlalchemy as sa

from berth.domain.candidates import (
    CandidateRequest, InventoryData, ProviderData, SearchBudget, TreeView, search,
)
from berth.store.providers import capacity_condition
from berth.store.schema import (
    inventories, resource_provider_aggregates as rpa, resource_provider_traits as rpt,
    resource_providers as rp, traits,
)

SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"
FIRST_BATCH = 64
MAX_BATCH = 4096


def _load_providers(conn, where) -> dict[int, ProviderData]:
    providers = {
        row.id: ProviderData(row.id, row.uuid, row.parent_provider_id, row.root_provider_id)
        for row in conn.execute(
            sa.select(rp.c.id, rp.c.uuid, rp.c.parent_provider_id, rp.c.root_provider_id).where(where)
        )
    }
    if not providers:
        return providers
    ids = list(providers)
    for row in conn.execute(sa.select(inventories).where(inventories.c.resource_provider_id.in_(ids))):
        providers[row.resource_provider_id].inventories[row.resource_class_id] = InventoryData(
            row.total, row.reserved, row.min_unit, row.max_unit, row.step_size, row.allocation_ratio, row.used)
    found = defaultdict(set)
    for provider_id, trait_id in conn.execute(
            sa.select(rpt.c.resource_provider_id, rpt.c.trait_id).where(rpt.c.resource_provider_id.in_(ids))):
        found[provider_id].add(trait_id)
    for provider_id, trait_set in found.items():
        providers[provider_id].traits = frozenset(trait_set)
    found = defaultdict(set)
    for provider_id, agg_id in conn.execute(
            sa.select(rpa.c.resource_provider_id, rpa.c.aggregate_id).where(rpa.c.resource_provider_id.in_(ids))):
        found[provider_id].add(agg_id)
    for provider_id, agg_set in found.items():
        providers[provider_id].aggregates = frozenset(agg_set)
    return providers


def _sharing_providers(conn) -> dict[int, ProviderData]:
    sharing_ids = sa.select(rpt.c.resource_provider_id).join(traits, traits.c.id == rpt.c.trait_id).where(
        traits.c.name == SHARING_TRAIT)
    return _load_providers(conn, rp.c.id.in_(sharing_ids))


class CandidateFinder:
    def __init__(self, conn, request: CandidateRequest, *, limit: int | None, max_candidates: int,
                 randomize: bool = False, max_steps: int = 200_000):
        self.conn = conn
        self.request = request
        self.randomize = randomize
        self.want = min(limit, max_candidates) if limit is not None else max_candidates
        self.budget = SearchBudget(max_steps)
        self.sharing = _sharing_providers(conn)
        self.providers: dict[int, ProviderData] = {}

    def _driving_condition(self):
        """A provider condition every answer's tree must meet somewhere, or None."""
        shared_classes = {rc for p in self.sharing.values() for rc in p.inventories}
        for group in self.request.groups:
            for rc, amount in group.resources.items():
                if rc not in shared_classes:
                    return sa.exists().where(inventories.c.resource_provider_id == rp.c.id,
                                             capacity_condition(rc, amount))
        return None

    def _tree_restriction(self):
        roots = {g.in_tree_root for g in self.request.groups if g.in_tree_root is not None}
        if len(roots) == 1 and not self.sharing:
            return rp.c.root_provider_id == roots.pop()
        return None

    def _root_batches(self):
        condition = self._driving_condition()
        restriction = self._tree_restriction()
        start = 0
        if self.randomize:
            highest = self.conn.execute(sa.select(sa.func.max(rp.c.id))).scalar() or 0
            start = random.randint(0, highest)
        seen_roots: set[int] = set()
        for lower, upper in ((start, None), (0, start + 1)) if start else ((0, None),):
            cursor, batch = lower, FIRST_BATCH
            while True:
                query = sa.select(rp.c.id, rp.c.root_provider_id).where(rp.c.id > cursor)
                if upper is not None:
                    query = query.where(rp.c.id < upper)
                if condition is not None:
                    query = query.where(condition)
                else:
                    query = query.where(rp.c.id == rp.c.root_provider_id)
                if restriction is not None:
                    query = query.where(restriction)
                rows = self.conn.execute(query.order_by(rp.c.id).limit(batch)).all()
                if not rows:
                    break
                cursor = rows[-1].id
                roots = []
                for _, root_id in rows:
                    if root_id not in seen_roots:
                        seen_roots.add(root_id)
                        roots.append(root_id)
                if roots:
                    yield roots
                if len(rows) < batch:
                    break
                batch = min(batch * 2, MAX_BATCH)

    def _trees(self, root_ids: list[int]) -> list[TreeView]:
        members = _load_providers(self.conn, rp.c.root_provider_id.in_(root_ids))
        self.providers.update(members)
        by_root = defaultdict(list)
        for provider in members.values():
            by_root[provider.root_id].append(provider)
        trees = []
        for root_id in root_ids:
            tree_members = sorted(by_root.get(root_id, []), key=lambda p: p.id)
            if not tree_members:
                continue
            tree_aggregates = frozenset().union(*(p.aggregates for p in tree_members))
            anchored = [s for s in self.sharing.values()
                        if s.root_id != root_id and s.aggregates & tree_aggregates]
            trees.append(TreeView(members[root_id], tree_members, anchored))
        return trees

    def find(self):
        """Candidates (in order) and every provider loaded for them."""
        results = []
        seen = set()
        for roots in self._root_batches():
            found = search(self._trees(roots), self.request, limit=self.want - len(results),
                           budget=self.budget, seen=seen)
            results.extend(found)
            if len(results) >= self.want or self.budget.remaining < 0:
                break
        for provider in self.sharing.values():
            self.providers.setdefault(provider.id, provider)
        if self.randomize:
            random.shuffle(results)
        return results, self.providers
