"""The trees a candidate request can only be answered in, when one of its conditions is rare.

Every answer's tree must meet each of these necessary conditions:

- for each (class, amount) of each request group, a provider of the tree with room for the amount
  within its unit limits, read through ``ix_inventories_max_unit`` (the providers whose max_unit
  admits the amount, one range of the index) or, when that range is wide, through
  ``ix_inventories_headroom`` (the providers with room for it); or, for a class a sharing provider
  with room offers, a provider of the tree in an aggregate with that sharing provider;
- for each any-of set of required traits (of a group or of the root), a provider of the tree with
  one of them, unless a sharing provider has one (it may serve the group instead);
- for each any-of set of aggregates of ``member_of``, a provider of the tree in one of them, unless a
  sharing provider is (the search asks more: one provider, or the root, in every set of its group;
  each set met by some provider of the tree follows from that).

A condition met by few providers names few trees: the search then visits those trees only, and a
request that fits nowhere (an amount above every provider's room, or above every provider's
max_unit) is answered from one index range without reading any tree. The search still decides
every answer (the conditions are necessary, not sufficient), so this can only change how fast an
answer comes, never the answer.

A condition met by many providers is no help, and reading them costs: such a condition is read
only up to ``bound`` trees, and is then remembered as wide for ``WIDE_HINT_SECONDS``, during
which this process does not read it again. A condition that became rare meanwhile is only noticed
after that, and costs the slower walk of every tree until then, not a wrong answer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from sqlalchemy import Connection

from berth.domain.candidate_request import CandidateRequest
from berth.domain.candidates import ProviderData
from berth.domain.capacity import MAX_INT, headroom_sql
from berth.store.rawsql import fetch

# Fewest trees a condition is read up to before it counts as wide, and most.
SMALLEST_BOUND: Final = 1024
LARGEST_BOUND: Final = 4096
WIDE_HINT_SECONDS: Final = 10.0
# The bound never goes below this, however small the cloud.
FEWEST_WORTH_READING: Final = 16

# The root of each provider read, by its primary key rather than a join, which PostgreSQL without
# statistics (a freshly loaded database) may plan as a scan of every provider. The LIMIT is written
# in (``{limit}``, a whole number): the ``IN {ids}`` list's values are bound after every other one.
_ROOT_OF = "(SELECT p.root_provider_id FROM resource_providers p WHERE p.id = {table}.resource_provider_id)"
# The unary ``+`` keeps ``i.max_unit`` off ``ix_inventories_max_unit``: this statement reads the
# headroom range, the next one the unit range.
_WITH_ROOM = (
    f"SELECT DISTINCT {_ROOT_OF.format(table='i')} FROM inventories i WHERE i.resource_class_id = ? "
    f"AND {headroom_sql('i')} >= ? AND +i.max_unit >= ? AND i.min_unit <= ? LIMIT {{limit}}"
)
# The providers of one class whose max_unit admits the amount, as one range of
# ``ix_inventories_max_unit``, each with whether it also has room for the amount within its minimum.
# Read before the headroom range: when the ratios over-commit, every provider may have room for an
# amount that none takes in one allocation, and the headroom range then holds the whole class, every
# row of it read and refused by the filter on max_unit. The room test is in the select list, not
# the WHERE clause, so that the LIMIT bounds the rows read (a tree may come twice, once each way).
_UNITS_ADMIT = (
    f"SELECT DISTINCT {_ROOT_OF.format(table='i')}, "
    f"CASE WHEN {headroom_sql('i')} >= ? AND i.min_unit <= ? THEN 1 ELSE 0 END "
    "FROM inventories i WHERE i.resource_class_id = ? AND i.max_unit >= ? LIMIT {limit}"
)
_WITH_TRAIT = (
    f"SELECT DISTINCT {_ROOT_OF.format(table='t')} FROM resource_provider_traits t "
    "WHERE t.trait_id IN {ids} LIMIT {limit}"
)
_IN_AGGREGATE = (
    f"SELECT DISTINCT {_ROOT_OF.format(table='a')} FROM resource_provider_aggregates a "
    "WHERE a.aggregate_id IN {ids} LIMIT {limit}"
)


# The members of some aggregates within a range of provider ids, through the (aggregate, provider)
# index: one seek per aggregate, then only the rows in the range.
_IN_AGGREGATE_BETWEEN = (
    f"SELECT DISTINCT {_ROOT_OF.format(table='a')} FROM resource_provider_aggregates a "
    "WHERE a.resource_provider_id > ? AND a.resource_provider_id <= ? AND a.aggregate_id IN {ids}"
)

_COUNT_TREES = "SELECT COUNT(*) FROM resource_providers WHERE id = root_provider_id"


def _limited(sql: str, limit: int) -> str:
    return sql.replace("{limit}", str(int(limit)))


@dataclass(frozen=True)
class _Condition:
    """One necessary condition: the providers that meet it, as a statement with its parameters."""

    key: Hashable
    sql: str
    params: tuple[int, ...] = ()
    ids: frozenset[int] | None = None
    # The trees meeting the condition that its statement does not read: the own trees of the
    # sharing providers that meet it for them.
    also: frozenset[int] = frozenset()
    # Not read when the condition of this key was read and named few trees: it said the same (the
    # headroom range after the unit range, which tells which of its providers have room).
    unless_narrow: Hashable | None = None
    # Its rows say whether each root meets the condition (a second column), not only that it may.
    flagged: bool = False
    # The aggregates of the sharing providers that meet the condition: every tree with a provider in
    # one of them meets it too. Read only when another condition narrows as well (and then up to
    # ``LARGEST_BOUND`` trees); else the search reads those trees as it goes (``Anchored``).
    anchored_via: frozenset[int] = frozenset()
    # The keys to remember as wide when the aggregates hold too many trees to be read.
    wide_keys: tuple[Hashable, ...] = ()


@dataclass(frozen=True)
class Anchored:
    """The only trees that may hold an answer, when what narrows them is a class only sharing
    providers (and few trees of their own) have room for: ``roots``, and every tree with a provider
    in one of ``aggregates``. The search reads those trees window by window of provider ids
    (``anchored_between``), as many as it needs, rather than every one of them first."""

    aggregates: frozenset[int]
    roots: frozenset[int]
    keys: tuple[Hashable, ...] = ()


class _WideHints:
    """Conditions this process found wide lately, and until when it believes so."""

    def __init__(self) -> None:
        self._until: dict[Hashable, float] = {}
        self._lock = threading.Lock()

    def is_wide(self, key: Hashable) -> bool:
        until = self._until.get(key)
        return until is not None and until > time.monotonic()

    def remember(self, key: Hashable) -> None:
        with self._lock:
            if len(self._until) > 10_000:
                self._until.clear()
            self._until[key] = time.monotonic() + WIDE_HINT_SECONDS


_HINTS = _WideHints()


class _AnchoredDensity:
    """Where the trees anchored to some aggregates begin among the provider ids and how densely they
    lay from there, as this process last walked them: the width of the first window a walk of the
    same aggregates reads, so that a limited request reads its trees in one statement instead of
    one per window doubled from a blind guess (three of them, 0.8 ms, at 100,000 hosts on
    PostgreSQL). A hint only: a window too narrow is followed by a wider one, one too wide reads
    more rows than needed."""

    def __init__(self) -> None:
        # aggregates -> (the lowest root found, trees per id from there)
        self._seen: dict[frozenset[int], tuple[int, float]] = {}

    def first_width(self, aggregates: frozenset[int], target: int) -> int:
        seen = self._seen.get(aggregates)
        if seen is None:
            return 2 * target
        start, density = seen
        # A fifth more than the density says, so that one window holds the target most times.
        return max(2 * target, start + int(target * 1.2 / density) + 1)

    def remember(self, aggregates: frozenset[int], start: int, trees: int, end: int) -> None:
        """``trees`` found with roots from ``start`` in the windows up to provider id ``end``."""
        if trees and end > start:
            if len(self._seen) > 1_000:
                self._seen.clear()
            self._seen[aggregates] = (start, trees / (end - start))


ANCHORED_DENSITY = _AnchoredDensity()


def forget_wide_hints() -> None:
    """Forget which conditions were found wide, and the count of trees (tests, and a database that
    changed under the process)."""
    _HINTS._until.clear()
    ANCHORED_DENSITY._seen.clear()
    _TREES.read_at = -float("inf")


def narrowed_roots(
    conn: Connection, request: CandidateRequest, sharing: Mapping[int, ProviderData], want: int
) -> list[int] | None:
    """The roots (in id order) of the only trees that may hold an answer, when a condition of the
    request is rare; None when none is, and every tree may."""
    narrowed = narrowing(conn, request, sharing, want)
    return every_anchored_root(conn, narrowed) if isinstance(narrowed, Anchored) else narrowed


def every_anchored_root(conn: Connection, anchored: Anchored) -> list[int] | None:
    """All the roots ``anchored`` names, in id order, read at once; None (and its conditions
    remembered as wide) when there are more than ``LARGEST_BOUND``."""
    roots = _anchored_roots(conn, anchored.aggregates)
    if roots is None:
        for key in anchored.keys:
            _HINTS.remember(key)
        return None
    return sorted(roots | anchored.roots)


def narrowing(
    conn: Connection, request: CandidateRequest, sharing: Mapping[int, ProviderData], want: int
) -> list[int] | Anchored | None:
    """The roots (in id order) of the only trees that may hold an answer, or the trees anchored to
    a few sharing providers (``Anchored``), when a condition of the request is rare; None when none
    is, and every tree may."""
    # A condition that names a quarter of the cloud's trees or more narrows nothing worth reading.
    bound = min(max(SMALLEST_BOUND, min(4 * want, LARGEST_BOUND)), max(FEWEST_WORTH_READING, _tree_count(conn) // 4))
    narrowed: set[int] | None = None
    anchored: list[Anchored] = []
    read: set[Hashable] = set()
    narrow: set[Hashable] = set()
    for condition in _conditions(request, sharing):
        # Groups asking the same (eight granular groups of one device each) make one condition.
        if condition.key in read or condition.unless_narrow in narrow or _HINTS.is_wide(condition.key):
            continue
        read.add(condition.key)
        rows = fetch(conn, _limited(condition.sql, bound + 1), condition.params, ids=condition.ids)
        if len(rows) > bound:
            _HINTS.remember(condition.key)
            continue
        narrow.add(condition.key)
        roots = {row[0] for row in rows if not condition.flagged or row[1]} | condition.also
        if condition.anchored_via:
            anchored.append(Anchored(condition.anchored_via, frozenset(roots), condition.wide_keys))
            continue
        narrowed = roots if narrowed is None else narrowed & roots
        if not narrowed:
            return []
    if narrowed is None:
        # Only the trees anchored to sharing providers narrow: those of the fewest aggregates.
        return min(anchored, key=lambda a: len(a.aggregates)) if anchored else None
    for pooled in anchored:
        trees = _anchored_roots(conn, pooled.aggregates)
        if trees is None:
            # The pools' aggregates hold too many trees for the condition to narrow anything.
            for key in pooled.keys:
                _HINTS.remember(key)
            continue
        narrowed &= trees | pooled.roots
        if not narrowed:
            return []
    return sorted(narrowed)


class _TreeCount:
    """How many trees the database holds, read at most every ``WIDE_HINT_SECONDS``: only how wide a
    condition may be depends on it, never an answer."""

    def __init__(self) -> None:
        self.count = 0
        self.read_at = -float("inf")


_TREES = _TreeCount()


def _tree_count(conn: Connection) -> int:
    now = time.monotonic()
    if now - _TREES.read_at > WIDE_HINT_SECONDS:
        _TREES.count = int(fetch(conn, _COUNT_TREES)[0][0])
        _TREES.read_at = now
    return _TREES.count


def _conditions(request: CandidateRequest, sharing: Mapping[int, ProviderData]) -> Iterable[_Condition]:
    """The request's necessary conditions, those likeliest to be rare first: traits, aggregates,
    then amounts (the suffixed groups' devices before the unsuffixed group's compute classes)."""
    shared_traits = frozenset().union(*(p.traits for p in sharing.values()))
    shared_aggregates = frozenset().union(*(p.aggregates for p in sharing.values()))
    for any_of in [*request.root_required, *(s for g in request.groups for s in g.required)]:
        if not any_of & shared_traits:
            yield _Condition(("trait", any_of), _WITH_TRAIT, ids=any_of)
    for any_of in (s for g in request.groups for s in g.member_of):
        if not any_of & shared_aggregates:
            yield _Condition(("aggregate", any_of), _IN_AGGREGATE, ids=any_of)
    ordered = [*request.suffixed, *([request.unsuffixed] if request.unsuffixed is not None else [])]
    for rc, amount in ((rc, amount) for group in ordered for rc, amount in group.resources.items()):
        # No inventory's max_unit is above MAX_INT, so every larger amount fits nowhere alike; one
        # past it keeps the parameter within SQLite's 64-bit integers.
        amount = min(amount, MAX_INT + 1)
        key = ("room", rc, amount)
        # Every max_unit is at least 1: the unit range of an amount of 1 is the whole class.
        units_key = ("units", rc, amount) if amount > 1 else key
        shared_room = [p for p in sharing.values() if rc in p.inventories and p.inventories[rc].can_take(amount)]
        # The sharing providers' own trees, and those in an aggregate with one, come with the condition.
        also = frozenset(p.root_id for p in shared_room)
        via: frozenset[int] = frozenset().union(*(p.aggregates for p in shared_room))
        wide = (key, units_key)
        room = (rc, amount, amount, amount)
        if units_key == key:
            yield _Condition(key, _WITH_ROOM, room, also=also, anchored_via=via, wide_keys=wide)
            continue
        units = (amount, amount, rc, amount)
        yield _Condition(units_key, _UNITS_ADMIT, units, also=also, flagged=True, anchored_via=via, wide_keys=wide)
        yield _Condition(key, _WITH_ROOM, room, also=also, unless_narrow=units_key, anchored_via=via, wide_keys=wide)


def _anchored_roots(conn: Connection, aggregates: frozenset[int]) -> frozenset[int] | None:
    """The roots of the trees with a provider in one of these aggregates, or None when there are
    more than ``LARGEST_BOUND``."""
    if not aggregates:
        return frozenset()
    rows = fetch(conn, _limited(_IN_AGGREGATE, LARGEST_BOUND + 1), ids=aggregates)
    if len(rows) > LARGEST_BOUND:
        return None
    return frozenset(row[0] for row in rows)


def anchored_between(conn: Connection, anchored: Anchored, lowest: int, highest: int) -> set[int]:
    """The roots of the trees with a provider whose id is in (lowest, highest] in one of the
    aggregates, and those of ``anchored.roots`` in that range: one seek of
    ``ix_resource_provider_aggregates_aggregate_provider`` per aggregate."""
    found = {root for root in anchored.roots if lowest < root <= highest}
    if anchored.aggregates:
        found.update(row[0] for row in fetch(conn, _IN_AGGREGATE_BETWEEN, (lowest, highest), ids=anchored.aggregates))
    return found
