"""Each process's copies of providers as the candidate search sees them, checked by revision.

Loading whole trees was most of an unlimited candidate request: thousands of inventory rows turned
into Python values and objects.  ``ProviderCache`` keeps copies from request to request and loads only
those that are missing or no longer current.  Callers may keep what they derive from a copy with it
(``ProviderCache.memo``: the API keeps the pieces of answers it rendered for a provider), and such
pieces live and die with the copy they were made from.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar, TypeVarTuple

from sqlalchemy import Connection

from berth.domain.candidates import InventoryData, ProviderData
from berth.store.candidates.kept_walk import KeptStretches
from berth.store.rawsql import fetch

Args = TypeVarTuple("Args")
T = TypeVar("T")

# Providers one process keeps copies of unless told otherwise.  About 3 KB each with the answer
# pieces kept with them (bench layout, by hand), so about 30 MB per worker when full: with three
# or four workers still inside the memory target at 100,000 hosts.  An unlimited request reads
# about 1,250 trees.
DEFAULT_CACHE_CAPACITY = 10_000
# Pieces kept with one copy: a few answer shapes (microversion, custom class names) and, for each,
# the few distinct amounts asked of the provider.  Past this many all are dropped, so that requests
# of ever new amounts cannot grow the copies without end.
MOST_MEMOS_PER_COPY = 16

# One row of a provider's members: id, parent id, root id, revision.
MemberRow = tuple[int, int | None, int, int]


# Whole providers, for those the cache has no current copy of. SQLite: with their inventories in one statement
# (a provider without inventory comes once, with NULLs), then their traits and aggregates in another.
_PROVIDER_FIELDS = (
    "p.id, p.uuid, p.parent_provider_id, p.root_provider_id, i.resource_class_id, i.total, i.reserved, "
    "i.min_unit, i.max_unit, i.step_size, i.allocation_ratio, i.used, p.revision "
)
_PROVIDERS = (
    "SELECT " + _PROVIDER_FIELDS + "FROM resource_providers p LEFT JOIN inventories i "
    "ON i.resource_provider_id = p.id WHERE p.id IN {ids}"
)
# By provider id, so that SQLite reads them through the (provider, ...) indexes.
_TRAITS_AND_AGGREGATES = (
    "SELECT 0, resource_provider_id, trait_id FROM resource_provider_traits WHERE resource_provider_id IN {ids} "
    "UNION ALL "
    "SELECT 1, resource_provider_id, aggregate_id FROM resource_provider_aggregates WHERE resource_provider_id IN {ids}"
)
# PostgreSQL: all of it in one statement, a round trip each time a copy is stale (half of the single
# picks at 10,000 hosts, whose chosen tree another worker had claimed on since this one last read it):
# the providers with their inventories (kind NULL), then their traits (kind 0) and aggregates (kind
# 1), each as one value after the kind. Snapshot-consistent, so the traits and aggregates are those
# of the providers found.
_WHOLE_PROVIDERS_PG = (
    "SELECT NULL::integer, " + _PROVIDER_FIELDS + "FROM unnest(?::integer[]) AS r(id) "
    "JOIN LATERAL (SELECT * FROM resource_providers p WHERE p.id = r.id OFFSET 0) p ON true "
    "LEFT JOIN LATERAL (SELECT * FROM inventories i WHERE i.resource_provider_id = p.id OFFSET 0) i ON true "
    "UNION ALL SELECT 0, r.id, NULL, NULL, NULL, t.trait_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL "
    "FROM unnest(?::integer[]) AS r(id) JOIN LATERAL "
    "(SELECT trait_id FROM resource_provider_traits t WHERE t.resource_provider_id = r.id OFFSET 0) t ON true "
    "UNION ALL SELECT 1, r.id, NULL, NULL, NULL, a.aggregate_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL "
    "FROM unnest(?::integer[]) AS r(id) JOIN LATERAL "
    "(SELECT aggregate_id FROM resource_provider_aggregates a WHERE a.resource_provider_id = r.id OFFSET 0) a "
    "ON true"
)


def _providers_from(rows: Iterable[Sequence[Any]]) -> tuple[dict[int, ProviderData], dict[int, int]]:
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


def _load_providers(conn: Connection, ids: list[int]) -> tuple[dict[int, ProviderData], dict[int, int]]:
    """These providers with their inventories, traits and aggregates, and the revision they are at."""
    if conn.dialect.name == "postgresql":
        rows = fetch(conn, _WHOLE_PROVIDERS_PG, (ids, ids, ids))
        providers, revisions = _providers_from(row[1:] for row in rows if row[0] is None)
        _add_traits_and_aggregates(providers, ((row[0], row[1], row[5]) for row in rows if row[0] is not None))
        return providers, revisions
    providers, revisions = _providers_from(fetch(conn, _PROVIDERS, ids=ids))
    if providers:
        _add_traits_and_aggregates(providers, fetch(conn, _TRAITS_AND_AGGREGATES, ids=list(providers)))
    return providers, revisions


def _add_traits_and_aggregates(providers: dict[int, ProviderData], rows: Iterable[Sequence[Any]]) -> None:
    """Each provider's traits (rows of kind 0) and aggregates (kind 1): ``(kind, provider id, value)``."""
    found: tuple[defaultdict[int, set[int]], defaultdict[int, set[int]]] = (defaultdict(set), defaultdict(set))
    for kind, provider_id, value in rows:
        found[kind][provider_id].add(value)
    for provider_id, trait_set in found[0].items():
        providers[provider_id].traits = frozenset(trait_set)
    for provider_id, agg_set in found[1].items():
        providers[provider_id].aggregates = frozenset(agg_set)


class _Copy:
    """A provider as it was at one revision of its row, and what callers derived from it."""

    __slots__ = ("revision", "provider", "memos", "answers")

    def __init__(self, revision: int, provider: ProviderData):
        self.revision = revision
        self.provider = provider
        # Of any type: each key's value is what the caller's compute for that key made.
        self.memos: dict[Hashable, Any] = {}
        # What the candidate search decided of the provider's tree, apart from the pieces callers
        # make of its answers (``ProviderCache.keep_answer``).
        self.answers: dict[Hashable, Any] = {}


def _remembered(kept: dict[Hashable, Any], key: Hashable, compute: Callable[[*Args], T], args: tuple[*Args]) -> T:
    value: T = kept.get(key, _MISSING)
    if value is _MISSING:
        if len(kept) >= MOST_MEMOS_PER_COPY:
            kept.clear()
        value = kept[key] = compute(*args)
    return value


_MISSING = object()


class ProviderCache:
    """Providers as the candidate search sees them, kept by one process from request to request.

    Each copy here is a provider as it was at one revision of its row, and every write that changes
    what the search sees (inventories, usage, traits, aggregates, parent) moves the revision on in the
    same transaction.  A request reads only the ids, parents, roots and revisions of the providers it
    needs, and loads whole only those whose copy is missing or no longer current, so what it sees is
    what the database holds, as without the cache.  The search only reads copies, so requests on
    several threads share them; what changes is each copy's memo, which only grows by whole entries
    (or is emptied) and is never read half-made.  Past ``capacity`` providers the oldest copies are
    dropped.
    """

    def __init__(self, capacity: int = DEFAULT_CACHE_CAPACITY):
        self.capacity = capacity
        self._copies: dict[int, _Copy] = {}
        # The walk over every tree, kept by stretches of provider ids (``berth.store.candidates.kept_walk``).
        self.stretches = KeptStretches()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._copies)

    def providers(self, conn: Connection, members: Iterable[MemberRow]) -> dict[int, ProviderData]:
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
                and copy.revision == revision
                and copy.provider.root_id == root_id
                and copy.provider.parent_id == parent_id
            ):
                found[provider_id] = copy.provider
            else:
                stale.append(provider_id)
        if stale:
            loaded, revisions = _load_providers(conn, stale)
            found.update(loaded)
            if self.capacity:
                self._keep(loaded, revisions)
        return found

    def _keep(self, loaded: dict[int, ProviderData], revisions: dict[int, int]) -> None:
        copies = self._copies
        with self._lock:
            for provider_id, provider in loaded.items():
                copies.pop(provider_id, None)
                copies[provider_id] = _Copy(revisions[provider_id], provider)
            while len(copies) > self.capacity:
                del copies[next(iter(copies))]

    def memo(self, provider: ProviderData, key: Hashable, compute: Callable[[*Args], T], *args: *Args) -> T:
        """``compute(*args)``, made once for this copy of ``provider`` and ``key``.

        What is kept must depend only on the provider's copy and the key (and must not be changed by
        the caller, since later requests share it).  A provider that is not the cache's current copy
        (the cache holds none, or a newer one) gets its value computed and nothing kept.
        """
        copy = self._copies.get(provider.id)
        if copy is None or copy.provider is not provider:
            return compute(*args)
        return _remembered(copy.memos, key, compute, args)

    def keep_answer(self, provider: ProviderData, key: Hashable, value: Any) -> None:
        """Keep ``value`` as what the search decided of this copy's tree for ``key``, in place of
        what was kept before (which the caller found no longer holds); nothing is kept when the copy
        is not the cache's current one."""
        copy = self._copies.get(provider.id)
        if copy is None or copy.provider is not provider:
            return
        answers = copy.answers
        if key not in answers and len(answers) >= MOST_MEMOS_PER_COPY:
            answers.clear()
        answers[key] = value

    def kept_of_roots(self, members: Iterable[MemberRow], key: Hashable) -> dict[int, tuple[ProviderData, Any]]:
        """By root id, the current copy of each root among these ``(id, parent id, root id,
        revision)`` rows and what is kept with it for ``key`` (by ``keep_answer``), where the copy is
        current and something is kept.  One pass over the rows instead of ``providers`` and then a
        look-up per root."""
        copies = self._copies
        found: dict[int, tuple[ProviderData, Any]] = {}
        for provider_id, parent_id, root_id, revision in members:
            if provider_id != root_id or parent_id is not None:
                continue
            copy = copies.get(provider_id)
            if copy is None or copy.revision != revision:
                continue
            provider = copy.provider
            if provider.root_id != root_id or provider.parent_id is not None:
                continue
            value = copy.answers.get(key, _MISSING)
            if value is not _MISSING:
                found[root_id] = (provider, value)
        return found

    def memo_count(self, provider_id: int) -> int:
        """How many pieces are kept with the copy of this provider (0 without a copy)."""
        copy = self._copies.get(provider_id)
        return len(copy.memos) if copy is not None else 0
