"""The trees a candidate request can only be answered in, when one of its conditions is rare.

Every answer's tree must meet each of these necessary conditions:

- for each (class, amount) of each request group, a provider of the tree with room for the amount
  (read through ``ix_inventories_headroom``, one range of the index), or, for a class a sharing
  provider with room offers, a provider of the tree in an aggregate with that sharing provider;
- for each any-of set of required traits (of a group or of the root), a provider of the tree with
  one of them, unless a sharing provider has one (it may serve the group instead);
- for each any-of set of aggregates of ``member_of``, a provider of the tree in one of them, unless a
  sharing provider is (the search asks more: one provider, or the root, in every set of its group;
  each set met by some provider of the tree follows from that).

A condition met by few providers names few trees: the search then visits those trees only, and a
request that fits nowhere (an amount above every provider's room) is answered from one index range
without reading any tree. The search still decides every answer (the conditions are necessary, not
sufficient), so this can only change how fast an answer comes, never the answer.

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
_WITH_ROOM = (
    f"SELECT DISTINCT {_ROOT_OF.format(table='i')} FROM inventories i WHERE i.resource_class_id = ? "
    f"AND {headroom_sql('i')} >= ? AND i.max_unit >= ? AND i.min_unit <= ? LIMIT {{limit}}"
)
_WITH_TRAIT = (
    f"SELECT DISTINCT {_ROOT_OF.format(table='t')} FROM resource_provider_traits t "
    "WHERE t.trait_id IN {ids} LIMIT {limit}"
)
_IN_AGGREGATE = (
    f"SELECT DISTINCT {_ROOT_OF.format(table='a')} FROM resource_provider_aggregates a "
    "WHERE a.aggregate_id IN {ids} LIMIT {limit}"
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
    # The trees anchored to sharing providers that meet the condition for them: these trees meet it too.
    also: frozenset[int] = frozenset()


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


def forget_wide_hints() -> None:
    """Forget which conditions were found wide, and the count of trees (tests, and a database that
    changed under the process)."""
    _HINTS._until.clear()
    _TREES.read_at = -float("inf")


def narrowed_roots(
    conn: Connection, request: CandidateRequest, sharing: Mapping[int, ProviderData], want: int
) -> list[int] | None:
    """The roots (in id order) of the only trees that may hold an answer, when a condition of the
    request is rare; None when none is, and every tree may."""
    # A condition that names a quarter of the cloud's trees or more narrows nothing worth reading.
    bound = min(max(SMALLEST_BOUND, min(4 * want, LARGEST_BOUND)), max(FEWEST_WORTH_READING, _tree_count(conn) // 4))
    narrowed: set[int] | None = None
    read: set[Hashable] = set()
    for condition in _conditions(conn, request, sharing):
        # Groups asking the same (eight granular groups of one device each) make one condition.
        if condition.key in read or _HINTS.is_wide(condition.key):
            continue
        read.add(condition.key)
        rows = fetch(conn, _limited(condition.sql, bound + 1), condition.params, ids=condition.ids)
        if len(rows) > bound:
            _HINTS.remember(condition.key)
            continue
        roots = {row[0] for row in rows} | condition.also
        narrowed = roots if narrowed is None else narrowed & roots
        if not narrowed:
            return []
    return sorted(narrowed) if narrowed is not None else None


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


def _conditions(
    conn: Connection, request: CandidateRequest, sharing: Mapping[int, ProviderData]
) -> Iterable[_Condition]:
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
        shared_room = [p for p in sharing.values() if rc in p.inventories and p.inventories[rc].can_take(amount)]
        if shared_room and not _HINTS.is_wide(key):
            # Few sharing providers in few aggregates: their trees come with the condition.
            anchored = _anchored_roots(conn, shared_room)
            if anchored is None:
                # The pools' aggregates hold too many trees for the condition to narrow anything.
                _HINTS.remember(key)
                continue
            yield _Condition(key, _WITH_ROOM, (rc, amount, amount, amount), also=anchored)
        elif not shared_room:
            yield _Condition(key, _WITH_ROOM, (rc, amount, amount, amount))


def _anchored_roots(conn: Connection, shared: list[ProviderData]) -> frozenset[int] | None:
    """The roots of the trees in an aggregate with one of these sharing providers (theirs
    included), or None when there are more than ``LARGEST_BOUND``."""
    aggregates = frozenset().union(*(p.aggregates for p in shared))
    roots = {p.root_id for p in shared}
    if aggregates:
        rows = fetch(conn, _limited(_IN_AGGREGATE, LARGEST_BOUND + 1), ids=aggregates)
        if len(rows) > LARGEST_BOUND:
            return None
        roots.update(row[0] for row in rows)
    return frozenset(roots)
