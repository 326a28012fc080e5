"""Feeding the candidate search: which trees to look at, in what order, and their data.

When a condition of the request is rare, only the trees it names are searched
(``berth.store.candidates.roots``). Otherwise:
Trees are visited in batches in provider-id order.  A batch is chosen by a "driving" query: the
providers that have room for one requested resource class that no sharing provider offers (so every
answer must have it inside its own tree), read through the (provider, class) index with a LIMIT.
Only the trees of that batch are loaded and searched, and the walk stops as soon as ``limit``
candidates are found, so the cost of a limited request follows the limit, not the size of the cloud.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache

from sqlalchemy import Connection

from berth.domain.candidate_request import CandidateRequest
from berth.domain.candidates import (
    Candidate,
    CandidateKey,
    ProviderData,
    SearchBudget,
    TreeView,
    search,
)
from berth.domain.capacity import MAX_INT, room_sql, units_sql
from berth.store.candidates.kept import Kept, KeptAnswers
from berth.store.candidates.kept_walk import KeptWalk, Run, WalkedTree
from berth.store.candidates.provider_cache import MemberRow, ProviderCache
from berth.store.candidates.roots import (
    ANCHORED_DENSITY,
    Anchored,
    anchored_between,
    every_anchored_root,
    narrowing,
)
from berth.store.placement import names
from berth.store.rawsql import fetch

SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"
MAX_BATCH = 4096


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
    "SELECT " + _MEMBER_FIELDS + " FROM {roots} AS r(id) "
    "JOIN LATERAL (SELECT * FROM resource_providers p WHERE p.root_provider_id = r.id OFFSET 0) p ON true"
)
# A few roots (a pick's planned trees) as a VALUES list of their own: over an array parameter,
# PostgreSQL planned the statement again on every run (its estimate of any array's length, against
# the length of the one at hand, made the prepared plan look dearer), about 0.06 ms of a pick's.
_FEW_ROOTS = 8


@lru_cache(maxsize=_FEW_ROOTS)
def _tree_members_pg(count: int) -> str:
    """``_TREE_MEMBERS_PG`` for ``count`` roots (their ids its parameters), or any number (an array, 0)."""
    if not count:
        return _TREE_MEMBERS_PG.format(roots="unnest(?::integer[])")
    return _TREE_MEMBERS_PG.format(roots="(VALUES " + ", ".join(["(?::integer)"] + ["(?)"] * (count - 1)) + ")")


def _tree_members_pg_rows(conn: Connection, root_ids: list[int]) -> Sequence[MemberRow]:
    if len(root_ids) <= _FEW_ROOTS:
        return fetch(conn, _tree_members_pg(len(root_ids)), root_ids)
    return fetch(conn, _tree_members_pg(0), (root_ids,))


# Where a batch's roots are dense in id order (the common case: the driving query walks providers in
# id order), one range scan of the root index instead: about 1 ms for 1,200 providers instead of 3.
# The rows of roots in the range but not in the batch are dropped.
_TREE_MEMBERS_RANGE = "SELECT " + _MEMBER_FIELDS + " FROM resource_providers p WHERE p.root_provider_id BETWEEN ? AND ?"
_SHARING_MEMBERS_PG = (
    "SELECT " + _MEMBER_FIELDS + " FROM (SELECT resource_provider_id FROM resource_provider_traits "
    "WHERE trait_id = ? OFFSET 0) s "
    "JOIN LATERAL (SELECT * FROM resource_providers p WHERE p.id = s.resource_provider_id OFFSET 0) p ON true"
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


def sharing_providers(conn: Connection, cache: ProviderCache) -> dict[int, ProviderData]:
    """Every sharing provider (``MISC_SHARES_VIA_AGGREGATE``) as the database holds it, by id."""
    members: Sequence[MemberRow]
    if conn.dialect.name == "postgresql":
        trait_id = names.trait_ids(conn, [SHARING_TRAIT]).get(SHARING_TRAIT)
        members = fetch(conn, _SHARING_MEMBERS_PG, (trait_id,)) if trait_id else []
    else:
        members = fetch(conn, _SHARING_MEMBERS, (SHARING_TRAIT,))
    return cache.providers(conn, members) if members else {}


class CandidateFinder:
    """The candidates of one request, from the trees of batch after batch of roots."""

    def __init__(
        self,
        conn: Connection,
        request: CandidateRequest,
        cache: ProviderCache,
        *,
        limit: int | None,
        max_candidates: int,
        randomize: bool = False,
        max_steps: int = 200_000,
        kept_shape: str | None = None,
        sharing: Mapping[int, ProviderData] | None = None,
    ):
        """``kept_shape``: under a plain request, keep the answers of each tree with its root's copy
        in ``cache`` (``Candidate.kept``), under this key of what the caller makes of such answers,
        and read them from there while they hold (``berth.store.candidates.kept``). ``sharing``:
        the sharing providers to search with (``sharing_providers``' answer, perhaps read a little
        earlier), instead of reading them now."""
        self.conn = conn
        self.request = request
        self.cache = cache
        self.randomize = randomize
        self.want = min(limit, max_candidates) if limit is not None else max_candidates
        self.budget = SearchBudget(max_steps)
        self.sharing = dict(sharing) if sharing is not None else sharing_providers(conn, cache)
        self.sharing_by_aggregate: dict[int, list[ProviderData]] = defaultdict(list)
        for provider in self.sharing.values():
            for aggregate in provider.aggregates:
                self.sharing_by_aggregate[aggregate].append(provider)
        self.providers: dict[int, ProviderData] = {}
        # The roots of the trees read whole into ``providers`` (``_read_trees``).
        self._trees_read: set[int] = set()
        # After ``find`` through the kept walk: where its candidates came from, run by run
        # (``berth.store.candidates.kept_walk.Run``), for a caller that keeps what it makes of a
        # whole stretch's answers; None otherwise.
        self.runs: list[Run] | None = None
        plain = request.plain_resources
        self._kept = (
            KeptAnswers(cache, f"kept {kept_shape} {plain}", plain, self.sharing, self.sharing_by_aggregate)
            if kept_shape is not None and plain is not None
            else None
        )

    def find(self) -> tuple[list[Candidate], dict[int, ProviderData]]:
        """Candidates (in order) and every provider loaded for them."""
        results: list[Candidate] = []
        seen: set[CandidateKey] = set()
        tree = self._tree_restriction()
        narrowed = [tree] if tree is not None else narrowing(self.conn, self.request, self.sharing, self.want)
        if narrowed is None and self._walk_is_kept():
            assert self._kept is not None
            walk = KeptWalk(self, self._kept)
            results = walk.find()
            self.runs = walk.runs
        else:
            for roots in self._root_batches(narrowed):
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
        self._load_named_sharing_trees(results)
        if self.randomize:
            random.shuffle(results)
        return results, self.providers

    def _load_named_sharing_trees(self, results: Sequence[Candidate]) -> None:
        """The whole trees of the sharing providers the answers name, into ``self.providers``: from
        1.29 an answer's summaries show every provider of the trees it names, and a sharing
        provider's tree is read by the walk only when it holds an answer of its own (and the walk
        got that far), which must not decide what an answer shows."""
        sharing = self.sharing
        if not sharing:
            return
        named: set[int] = set()
        position = 0
        for stretch, count in self.runs or [(None, len(results))]:
            if stretch is not None and stretch.answers is not None and count == len(stretch.answers):
                named |= stretch.named_sharing
            else:
                named.update(
                    pid for c in results[position : position + count] for pid in c.allocations if pid in sharing
                )
            position += count
        self._read_trees({sharing[pid].root_id for pid in named if pid in sharing})

    def _read_trees(self, roots: set[int] | frozenset[int]) -> list[ProviderData]:
        """The providers of these whole trees, read into ``self.providers`` (each tree once a
        finder)."""
        unread = sorted(roots - self._trees_read)
        if unread:
            if self.conn.dialect.name == "postgresql":
                rows = _tree_members_pg_rows(self.conn, unread)
            else:
                rows = fetch(self.conn, _TREE_MEMBERS, ids=unread)
            self.providers.update(self.cache.providers(self.conn, rows))
            self._trees_read.update(unread)
        return [provider for provider in self.providers.values() if provider.root_id in roots]

    def candidates_in(self, root_id: int) -> list[Candidate]:
        """The first candidates (up to the finder's limit) of one tree, as the database holds it now;
        the providers they name are in ``self.providers``."""
        return self.candidates_in_trees([root_id])

    def candidates_in_trees(self, root_ids: list[int]) -> list[Candidate]:
        """The candidates (up to the finder's limit) of these trees, in their order, as the
        database holds them now; the providers they name are in ``self.providers``."""
        for provider in self.sharing.values():
            self.providers.setdefault(provider.id, provider)
        return search(
            self._trees(root_ids),
            self.request,
            limit=self.want,
            budget=self.budget,
            seen=set(),
            sharing_ids=frozenset(self.sharing),
        )

    def candidates_in_each(self, root_ids: list[int]) -> dict[int, list[Candidate]]:
        """``candidates_in`` of each of these trees, read together (one round trip for all)."""
        for provider in self.sharing.values():
            self.providers.setdefault(provider.id, provider)
        sharing_ids = frozenset(self.sharing)
        return {
            root_id: []
            if found is None
            else search([found], self.request, limit=self.want, budget=self.budget, seen=set(), sharing_ids=sharing_ids)
            for root_id, found, _ in self.decided(root_ids)
        }

    def tree_views(self, root_ids: list[int]) -> list[TreeView]:
        """The trees of these roots as the database holds them now, each with the sharing providers
        anchored to it, for a caller searching them over usage of its own making
        (``berth.store.pick.preemption``); their providers are in ``self.providers``."""
        for provider in self.sharing.values():
            self.providers.setdefault(provider.id, provider)
        if not root_ids:
            return []
        return [tree for tree in self._trees(root_ids) if isinstance(tree, TreeView)]

    # --- which trees, in what order ------------------------------------------------------------

    def _driving_class(self) -> tuple[int, int] | None:
        """A (class, amount) every answer's tree must hold itself: one no sharing provider offers.

        Classes asked for by suffixed groups (devices, bandwidth) come first, since fewer trees
        have them than have the compute classes asked for by the unsuffixed group.
        """
        shared_classes = {rc for p in self.sharing.values() for rc in p.inventories}
        choices = [(rc, amount) for group in self.request.suffixed for rc, amount in group.resources.items()]
        if self.request.unsuffixed is not None:
            choices += list(self.request.unsuffixed.resources.items())
        return next(((rc, amount) for rc, amount in choices if rc not in shared_classes), None)

    def _tree_restriction(self) -> int | None:
        """The one tree that can hold every answer, when ``in_tree`` names one: every provider of a
        group with ``in_tree`` is in that tree, so an answer in another tree would need that group
        served by a sharing provider of it; when it has none (a compute host named, as a move to a
        given host does), only the named tree is read."""
        roots = {g.in_tree_root for g in self.request.groups if g.in_tree_root is not None}
        if len(roots) != 1:
            return None
        root = roots.pop()
        if any(provider.root_id == root for provider in self.sharing.values()):
            return None
        return root

    def _filters_beyond_room(self) -> bool:
        request = self.request
        return bool(request.root_required or request.root_forbidden) or any(
            g.required or g.forbidden or g.member_of or g.forbidden_aggregates for g in request.groups
        )

    def driving_statement(self) -> tuple[str, str, list[int]]:
        """The statement reading providers in id order with whether each fits (its first column the
        provider, its second the root, its third whether it fits), its cursor column, and its
        parameters."""
        driving = self._driving_class()
        if driving is not None:
            rc, amount = driving
            # No inventory's max_unit is above MAX_INT, so every larger amount fits nowhere alike; one
            # past it keeps the parameter within SQLite's 64-bit integers.
            amount = min(amount, MAX_INT + 1)
            sql, column, in_tree = _DRIVING_SQL, _DRIVING_CURSOR, _DRIVING_IN_TREE
            fixed = [amount, amount, amount, amount, rc]
        else:
            sql, column, in_tree = _ROOTS_SQL, _ROOTS_CURSOR, _ROOTS_IN_TREE
            fixed = []
        tree = self._tree_restriction()
        if tree is not None:
            sql += in_tree
            fixed.append(tree)
        return sql, column, fixed

    def _root_batches(self, narrowed: list[int] | Anchored | None) -> Iterator[list[int]]:
        """Roots of trees that may hold an answer, batch by batch, each root once, from what the
        narrowing (``berth.store.candidates.roots``) found."""
        if isinstance(narrowed, Anchored):
            if not self.randomize:
                yield from self._anchored_batches(narrowed)
                return
            # From a random tree on: every one of them first, as other narrowed requests do.
            barren = self._barren_pools(narrowed)
            roots = every_anchored_root(self.conn, narrowed)
            narrowed = [root for root in roots if root not in barren] if roots is not None else None
        if narrowed is not None:
            yield from self._batches_of(narrowed)
            return
        start = 0
        if self.randomize:
            highest = fetch(self.conn, "SELECT MAX(id) FROM resource_providers")[0][0] or 0
            start = random.randint(0, highest)
        statement = self.driving_statement()
        seen_roots: set[int] = set()
        for lower, upper in ((start, None), (0, start + 1)) if start else ((0, None),):
            yield from self.root_batches_between(statement, lower, upper, seen_roots)

    def _batches_of(self, roots: list[int]) -> Iterator[list[int]]:
        """The few roots a rare condition leaves, in id order (from a random one when asked), in
        batches growing as the walk's do."""
        if self.randomize and roots:
            start = random.randrange(len(roots))
            roots = roots[start:] + roots[:start]
        position, batch = 0, min(self.want + self.want // 4 + 2, MAX_BATCH)
        while position < len(roots):
            yield roots[position : position + batch]
            position += batch
            batch = min(batch * 2, MAX_BATCH)

    def _anchored_batches(self, anchored: Anchored) -> Iterator[list[int]]:
        """The trees anchored to a few sharing providers, window by window of provider ids from the
        lowest, in batches growing as the walk's do: a limited request reads about as many of them
        as it needs, however many the pools' aggregates hold."""
        highest = fetch(self.conn, "SELECT MAX(id) FROM resource_providers")[0][0] or 0
        target = min(self.want + self.want // 4 + 2, MAX_BATCH)
        lowest, width = 0, ANCHORED_DENSITY.first_width(anchored.aggregates, target)
        pending: set[int] = set()
        seen: set[int] = set(self._barren_pools(anchored))
        found, start = 0, None
        while lowest < highest:
            upper = min(lowest + width, highest)
            new = anchored_between(self.conn, anchored, lowest, upper) - seen - pending
            if new:
                found += len(new)
                start = min(new) if start is None else start
                pending |= new
            lowest = upper
            if start is not None:
                ANCHORED_DENSITY.remember(anchored.aggregates, start, found, lowest)
            if len(pending) < target and lowest < highest:
                # Sparse: a wider window next, so that a batch takes few statements.
                width *= 2
                continue
            if pending:
                seen |= pending
                yield sorted(pending)
                pending = set()
            target = min(target * 2, MAX_BATCH)

    def _barren_pools(self, anchored: Anchored) -> frozenset[int]:
        """The sharing providers' own trees among those ``anchored`` names that cannot hold an answer:
        a pool of disk is in its own aggregate, and may be the lowest ids of the cloud, but a tree
        without a provider of the driving class (which no sharing provider offers) answers nothing."""
        driving = self._driving_class()
        if driving is None or not anchored.roots:
            return frozenset()
        # Read whole: an answer naming one of their sharing providers shows their trees' summaries
        # anyway (``_load_named_sharing_trees``), so this costs no statement of its own.
        holding = {p.root_id for p in self._read_trees(anchored.roots) if driving[0] in p.inventories}
        return anchored.roots - holding

    def root_batches_between(
        self, statement: tuple[str, str, list[int]], lower: int, upper: int | None, seen_roots: set[int]
    ) -> Iterator[list[int]]:
        sql, column, fixed = statement
        # Most trees in a healthy cloud fit, so the first batch is about what was asked for;
        # twice that when traits or aggregates, which the driving query does not test, also
        # have to match, rather than a second round of statements.
        first = self.want + self.want // 4 + 2
        cursor, batch = lower, min(first * 2 if self._filters_beyond_room() else first, MAX_BATCH)
        bounded = (
            sql + (f" AND {column} < ?" if upper is not None else "") + f" AND {column} > ? ORDER BY {column} LIMIT ?"
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

    # --- the trees themselves ------------------------------------------------------------------

    def _member_rows(self, root_ids: list[int]) -> Sequence[MemberRow]:
        lowest, highest = min(root_ids), max(root_ids)
        if highest - lowest < 2 * len(root_ids):
            # On SQLite too: one statement whatever the batch's size, which SQLite keeps compiled,
            # instead of a new one of a thousand placeholders for each batch.
            wanted = set(root_ids)
            return [row for row in fetch(self.conn, _TREE_MEMBERS_RANGE, (lowest, highest)) if row[2] in wanted]
        if self.conn.dialect.name != "postgresql":
            return fetch(self.conn, _TREE_MEMBERS, ids=root_ids)
        return _tree_members_pg_rows(self.conn, root_ids)

    def _trees(self, root_ids: list[int]) -> Iterator[TreeView | Kept]:
        """The trees of these roots, in their order: loaded (and their providers added to
        ``self.providers``) at once, each tree's view made only when the search comes to it, so
        that the trees of a batch beyond the limit cost their loading alone.  Under a plain request
        a tree whose answers are kept with its root's copy, and still hold, comes as those answers,
        without loading, view or search (``berth.store.candidates.kept``)."""
        return (found for _, found, _ in self.decided(root_ids) if found is not None)

    def decided(self, root_ids: list[int]) -> Iterator[WalkedTree]:
        """Each of these trees read: its root, its view or kept answers (None: no answer), and its
        providers."""
        rows = self._member_rows(root_ids)
        kept: dict[int, tuple[list[ProviderData], Kept | None]] = {}
        rows_by_root: dict[int, list[MemberRow]] = {}
        if self._kept is not None:
            rows, kept, rows_by_root = self._kept.split(rows)
        members = self.cache.providers(self.conn, rows) if rows else {}
        self.providers.update(members)
        by_root: dict[int, list[ProviderData]] = {}
        for provider in members.values():
            tree_members = by_root.get(provider.root_id)
            if tree_members is None:
                by_root[provider.root_id] = [provider]
            else:
                tree_members.append(provider)
        return self._views(root_ids, members, by_root, kept, rows_by_root)

    def _views(
        self,
        root_ids: list[int],
        members: dict[int, ProviderData],
        by_root: dict[int, list[ProviderData]],
        kept: dict[int, tuple[list[ProviderData], Kept | None]],
        rows_by_root: dict[int, list[MemberRow]],
    ) -> Iterator[WalkedTree]:
        sharing, keeping, providers = self.sharing, self._kept, self.providers
        for root_id in root_ids:
            found = kept.get(root_id)
            if found is not None:
                tree_providers, answer = found
                if answer is not None:
                    for provider in tree_providers:
                        providers[provider.id] = provider
                yield root_id, answer, tree_providers
                continue
            tree_members = by_root.get(root_id)
            root = members.get(root_id)
            # No root: deleted since the driving query read it.
            if not tree_members or root is None:
                continue
            if len(tree_members) > 1:
                tree_members.sort(key=_provider_id)
                anchored = self._anchored_sharing(root_id, tree_members) if sharing else []
            else:
                # A host by itself, the commonest tree: anchored only through its own aggregates.
                anchored = self._anchored_sharing(root_id, tree_members) if sharing and root.aggregates else []
            if keeping is not None:
                # Its answers, kept with its root's copy for the requests after this one.
                decided = keeping.decide(root, tree_members, anchored, rows_by_root[root_id])
                if decided is not False:
                    yield root_id, decided, tree_members
                    continue
            yield root_id, TreeView(root, tree_members, anchored), tree_members

    # --- the walk kept by stretches of provider ids ----------------------------------------------

    def _walk_is_kept(self) -> bool:
        """Whether this request walks every tree through stretches kept from one request to the next
        (``berth.store.candidates.kept_walk``): under a plain request (whose trees' answers are kept),
        in id order, over every tree, by the driving class, with a cache that keeps."""
        return (
            self._kept is not None
            and not self.randomize
            and bool(self.cache.capacity)
            and self._tree_restriction() is None
            and self._driving_class() is not None
        )

    def _anchored_sharing(self, root_id: int, tree_members: list[ProviderData]) -> list[ProviderData]:
        """The sharing providers of another tree in an aggregate with a provider of this one."""
        if not any(p.aggregates for p in tree_members):
            return []
        # Through the aggregate index: a large cloud has hundreds of sharing providers.
        anchored_ids = {
            s.id
            for p in tree_members
            for a in p.aggregates
            for s in self.sharing_by_aggregate.get(a, ())
            if s.root_id != root_id
        }
        if not anchored_ids:
            return []
        # By id from the set found, not by a pass over every sharing provider for each tree.
        sharing = self.sharing
        return [sharing[i] for i in sorted(anchored_ids)]
