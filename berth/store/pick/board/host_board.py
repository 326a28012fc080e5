"""Each process's board of every tree: its room per resource class and what the weighers read of it,
as arrays over the trees, so that a pick weighs every tree in a few vector operations.

A pick of the commonest request (one group of resources, perhaps with traits of the root:
``CandidateRequest.weighable_resources``) reads the board instead of searching every tree
(``berth.store.pick.board.on_board``); the board keeps which traits each tree's root has. The board is a
ranking, not the books: the tree it ranks first is searched alone, as the database holds it, and
its allocation is written by the same conditional write as any other. So a board that is behind
the database can only make a pick choose a worse tree or try one more, never over-commit; and when
it finds no tree the pick searches every tree as the candidates query does, so that a tree freed
since the board was read is not missed.

The board is read again (``refresh``, by a thread of its own in a server's workers) when it is
older than ``min_age`` seconds and picks read it lately, and then only the
trees whose providers moved on a revision are worked out again (through the ``ProviderCache``).
Reading every provider's revision costs about what the cloud's size does, so the interval grows
with the time the last refresh took: the board never takes more than a tenth of a worker's time.
What a pick claims through this process is taken off its tree on the board at once, so that the
picks of one worker between two refreshes spread as the books would make them.

A refresh also reads the sharing providers (``pools``), which the picks weighed on the board then
use instead of reading every one of them each (at 100,000 hosts, with 100 of them, that read was a
quarter of PostgreSQL's time under single picks); what a pick takes from one is taken off its copy.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection

from berth.domain.candidates import InventoryData, ProviderData
from berth.domain.capacity import headroom
from berth.domain.errors import Unavailable
from berth.domain.weighing import free_amount
from berth.store.candidates.finder import sharing_providers
from berth.store.candidates.provider_cache import ProviderCache
from berth.store.database import Database
from berth.store.placement import names
from berth.store.rawsql import fetch

FloatArray = npt.NDArray[np.float64]
IndexArray = npt.NDArray[np.intp]

LOG = logging.getLogger(__name__)

MIN_AGE: Final = 0.1
# The arrays one board view keeps (``BoardView.derived``).
MOST_DERIVED: Final = 32
# The weighings one board view keeps (``BoardView.kept``).
MOST_KEPT: Final = 8
# The changed trees a view notes before it forgets them (``BoardView.changes_since``).
MOST_CHANGES_NOTED: Final = 4096
# The longest a pick waits for a worker's first read of the board.
FIRST_READ_WAIT: Final = 60.0
# The background thread's shortest wait between two looks at the board.
_NAP: Final = 0.02
# A board no pick read for this long is refreshed less often: at most once a
# ``UNUSED_REFRESH_SECONDS``, and for at most ``UNUSED_REFRESH_SHARE`` of a worker's time, but at
# least once a ``UNUSED_STALEST_SECONDS``.
UNUSED_SECONDS: Final = 30.0
# So that an unused board still follows the cloud (a refresh reads again only the trees that
# changed) and the first picks after a quiet spell, or after a cloud was built, find it nearly
# current instead of waiting for a read of every new tree (seconds at 100,000 hosts). Every 30 s,
# as it was, a 10,000-host cloud built in 15 s was not on the boards of the workers that had not
# picked yet: their first picks waited for a read of every tree (a p99 of 863 ms in the bench's
# first second). Idle, a refresh reads one row a stretch of 64 trees. A large cloud's refreshes,
# which take seconds while it is built, still come every 30 s, as they did: read less often, its
# board was further behind when the picks came, and their first refresh read more trees.
UNUSED_REFRESH_SECONDS: Final = 1.0
UNUSED_REFRESH_SHARE: Final = 0.02
UNUSED_STALEST_SECONDS: Final = 30.0
# The board refreshes at most this often relative to how long a refresh takes.
REFRESH_SHARE: Final = 0.1
# A pick that finds the board of a small cloud (up to ``QUIET_CATCH_UP_TREES``) quiet (no pick read
# it for ``UNUSED_SECONDS``: its thread read it once a second or less often) and older than a busy
# board gets wakes the thread to read it again, and waits for that read this long at most: so that
# the first pick after a quiet spell sees the hosts added, filled or freed meanwhile (a host
# registered half a second before was on no board, and so neither chosen nor named as an
# alternate). A large cloud's board is left to its thread as it was: a read of all that changed
# while it was quiet can take seconds there, one new host among thousands matters little, and the
# bench's first picks at 100,000 hosts were slower with the wait (one run each: 290.9 against 520.6
# placements/s, p99 287 against 54 ms).
QUIET_CATCH_UP_TREES: Final = 1_000
QUIET_WAIT_SECONDS: Final = 0.05

# Whether a tree changed, from three numbers: every write a tree's providers see moves a revision
# on by one, and a provider added or removed changes the count or the sum of ids. Revisions start
# at random 52-bit numbers: summed modulo a prime, no tree of any size overflows the sum, and one
# step of one revision still changes it.
_TREE_SIGNATURES = (
    "SELECT root_provider_id, COUNT(*), SUM(id), SUM(revision % 1000003) FROM resource_providers "
    "GROUP BY root_provider_id"
)
# The same three numbers over stretches of ``_STRETCH`` root ids: a refresh reads these first (a
# row for every 64 trees instead of one for each) and then the trees' own signatures only in the
# stretches whose numbers moved.
_STRETCH = 64
_STRETCH_SIGNATURES = (
    f"SELECT root_provider_id / {_STRETCH}, COUNT(*), SUM(id), SUM(revision % 1000003) FROM resource_providers "
    f"GROUP BY root_provider_id / {_STRETCH}"
)
_TREE_SIGNATURES_BETWEEN = (
    "SELECT root_provider_id, COUNT(*), SUM(id), SUM(revision % 1000003) FROM resource_providers "
    "WHERE root_provider_id >= ? AND root_provider_id < ? GROUP BY root_provider_id"
)
# Past this share of the stretches moved, the trees' signatures are read at once, whole.
_MOVED_SHARE = 0.25
_TREE_MEMBERS = (
    "SELECT id, parent_provider_id, root_provider_id, revision FROM resource_providers WHERE root_provider_id IN {ids}"
)
_CHUNK = 2000
_WEIGHED: Final = {"VCPU": "cpus", "PCPU": "cpus", "MEMORY_MB": "ram", "DISK_GB": "disk"}


@dataclass(frozen=True)
class _Tree:
    """What the board keeps of one tree, and the revisions it was worked out from."""

    # (providers, sum of their ids, sum of their revisions)
    signature: tuple[int, int, int]
    # resource class -> the most any one provider of the tree has room for (before unit checks)
    room: Mapping[int, float]
    ram: float
    cpus: float
    disk: float
    aggregates: frozenset[int]
    root_traits: frozenset[int]


_Kept = TypeVar("_Kept")


class _ChangeLog:
    """The indexes of the trees a view wrote in place, in order, as far back as it remembers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.start = 0
        self.indexes: list[int] = []


@dataclass(frozen=True)
class BoardView:
    """The board at one refresh: arrays indexed alike, one entry per tree."""

    roots: npt.NDArray[np.int64]
    index_of: Mapping[int, int]
    room: Mapping[int, FloatArray]
    ram: FloatArray
    cpus: FloatArray
    disk: FloatArray
    # aggregate -> the trees with a provider in it
    by_aggregate: Mapping[int, IndexArray]
    # trait -> the trees whose root has it
    by_root_trait: Mapping[int, IndexArray]
    # (aggregates, root) -> ``anchored``'s answer, for the view's life
    _anchored: dict[tuple[frozenset[int], int], IndexArray] = field(default_factory=dict, compare=False, repr=False)
    # ``derived``'s arrays, for the view's life
    _derived: dict[Hashable, npt.NDArray[Any]] = field(default_factory=dict, compare=False, repr=False)
    # ``kept``'s objects, for the view's life
    _kept: dict[Hashable, Any] = field(default_factory=dict, compare=False, repr=False)
    # the trees written in place since the view was made (``changes_since``)
    _changes: _ChangeLog = field(default_factory=_ChangeLog, compare=False, repr=False)

    def anchored(self, aggregates: frozenset[int], own_root: int) -> IndexArray:
        """The trees with a provider in any of ``aggregates``, but for ``own_root``'s: those a
        sharing provider in them serves. Worked out once per view (every pick of a cloud with
        sharing pools asked it again, 7 % of a worker's samples): a view's aggregates change
        only with a new view (``_updated`` makes one when a tree's do)."""
        key = (aggregates, own_root)
        found = self._anchored.get(key)
        if found is None:
            lists = [self.by_aggregate[a] for a in aggregates if a in self.by_aggregate]
            found = np.unique(np.concatenate(lists)) if lists else _NONE
            own = self.index_of.get(own_root)
            if own is not None:
                found = found[found != own]
            self._anchored[key] = found
        return found

    def derived(self, key: Hashable, make: Callable[[], npt.NDArray[Any]]) -> npt.NDArray[Any]:
        """An array ``make`` works out from what a view never changes (its trees, their aggregates
        and root traits) and what ``key`` names, made once per view while it is among the last
        ``MOST_DERIVED`` kept; the caller must not write to it."""
        found = self._derived.get(key)
        if found is None:
            if len(self._derived) >= MOST_DERIVED:
                # A key may name state that moves on (a sharing pool's free disk), and a view lives
                # as long as no tree is added or regrouped: kept without a bound, its arrays (one
                # entry per tree each) would pile up pick after pick.
                self._derived.clear()
            found = self._derived[key] = make()
        return found

    def kept(self, key: Hashable, make: Callable[[], _Kept]) -> _Kept:
        """An object ``make`` makes of the view (``berth.store.pick.board.kept_weights``), kept under
        ``key`` while it is among the last ``MOST_KEPT`` made, which follows the view's changes
        itself (``changes_since``)."""
        found = self._kept.get(key)
        if found is None:
            if len(self._kept) >= MOST_KEPT:
                self._kept.clear()
            found = self._kept[key] = make()
        return found

    def note_changed(self, indexes: Sequence[int]) -> None:
        """The trees at ``indexes`` were written in place (``take``, a refresh's ``_updated``)."""
        log = self._changes
        with log.lock:
            if len(log.indexes) >= MOST_CHANGES_NOTED:
                log.start += len(log.indexes)
                log.indexes = []
            log.indexes.extend(indexes)

    def changes_since(self, seen: int | None) -> tuple[list[int] | None, int]:
        """The indexes of the trees written in place since the position ``seen`` (None: not known,
        or further back than the view remembers), and the position now."""
        log = self._changes
        with log.lock:
            now = log.start + len(log.indexes)
            if seen is None or seen < log.start:
                return None, now
            return log.indexes[seen - log.start :], now

    def roots_allowed(self, required: Sequence[frozenset[int]], forbidden: frozenset[int]) -> npt.NDArray[np.bool_]:
        """Which trees' roots have a trait of each of ``required`` (each a set of alternatives)
        and none of ``forbidden``."""
        allowed = np.ones(len(self.roots), dtype=bool)
        for any_of in required:
            has = np.zeros(len(self.roots), dtype=bool)
            for trait in any_of:
                has[self.by_root_trait.get(trait, _NONE)] = True
            allowed &= has
        for trait in forbidden:
            allowed[self.by_root_trait.get(trait, _NONE)] = False
        return allowed

    def room_of(self, resource_class: int) -> FloatArray:
        found = self.room.get(resource_class)
        return found if found is not None else np.full(len(self.roots), -np.inf)

    def take(self, index: int, amounts: Mapping[int, int], weighed: Mapping[int, str]) -> None:
        """What a claim placed on the tree at ``index``, taken off its room and free amounts
        (``weighed``: ``weighed_classes``)."""
        for resource_class, amount in amounts.items():
            if resource_class in self.room:
                self.room[resource_class][index] -= amount
            name = weighed.get(resource_class)
            if name is not None:
                getattr(self, _WEIGHED[name])[index] -= amount
        self.note_changed((index,))


_NONE: Final = np.zeros(0, dtype=np.intp)
_EMPTY = BoardView(np.zeros(0, dtype=np.int64), {}, {}, np.zeros(0), np.zeros(0), np.zeros(0), {}, {})


class HostBoard:
    """The board of one process over one database; threads share it."""

    def __init__(self, min_age: float = MIN_AGE, *, enabled: bool = True):
        """``enabled=False``: a board never read, so that every pick searches every tree (the tests
        run each pick both ways)."""
        self.min_age = min_age
        self.enabled = enabled
        self.view = _EMPTY
        self._trees: dict[int, _Tree] = {}
        self._stretches: dict[int, tuple[int, int, int]] = {}
        self._read_at = -float("inf")
        self._age_needed = min_age
        self._refreshing = threading.Lock()
        self.last_refresh_seconds = 0.0
        self.background = False
        self._first_read = threading.Event()
        self._stopped = threading.Event()
        # Set to have the thread read the board now (``catch_up_if_quiet``), which then waits on
        # ``_refreshed`` for a read begun after it asked (``_fresh_from``).
        self._wake = threading.Event()
        self._refreshed = threading.Condition()
        self._fresh_from = -float("inf")
        # When a pick last read the board: one that no pick reads is refreshed seldom.
        self._used_at = -float("inf")
        self._pools: dict[int, ProviderData] | None = None
        self._pools_lock = threading.Lock()

    def use(self) -> BoardView:
        """The board as last read, for a pick that weighs on it. While the background thread makes
        its first read (a worker just started), the pick waits for it: the alternative, searching
        every tree inside the write transaction, would hold every writer back for longer."""
        self._used_at = time.monotonic()
        if self.enabled and self.background and not self._first_read.is_set():
            self._first_read.wait(FIRST_READ_WAIT)
        return self.view

    def pools(self) -> Mapping[int, ProviderData] | None:
        """The sharing providers by id as the last refresh read them, less what this process's
        picks took from them since; None before the first read."""
        return self._pools

    def took_from_pools(self, taken: Mapping[int, Mapping[int, int]]) -> None:
        """What a claim placed on sharing providers (provider id -> class -> amount), taken off
        their copies in ``pools``."""
        with self._pools_lock:
            pools = self._pools
            if pools is None or not any(provider_id in pools for provider_id in taken):
                return
            updated = dict(pools)
            for provider_id, by_class in taken.items():
                pool = updated.get(provider_id)
                if pool is not None:
                    updated[provider_id] = _with_used(pool, by_class)
            self._pools = updated

    def refresh_in_background(self, db: Database, cache: ProviderCache) -> None:
        """Keep the board fresh from a daemon thread of its own, so that no pick waits for a read
        of every tree (a server's workers do; without it, the pick finding the board due reads it)."""
        if not self.enabled:
            return
        self.background = True
        self._stopped.clear()
        threading.Thread(target=self._keep_fresh, args=(db, cache), name="berth-host-board", daemon=True).start()

    def stop_refreshing(self) -> None:
        """End the background thread (before its database goes away: tests)."""
        self._stopped.set()
        self._wake.set()

    def _keep_fresh(self, db: Database, cache: ProviderCache) -> None:
        # Read at once, picks or not: a large cloud's first read takes seconds.
        self._read_or_say_why(db, cache, force=True)
        while not self._stopped.is_set():
            self._wake.wait(max(_NAP, self._age_needed - (time.monotonic() - self._read_at)))
            woken = self._wake.is_set()
            self._wake.clear()
            if self._stopped.is_set():
                break
            if not (woken or self.due()):
                continue
            if not self._read_or_say_why(db, cache, force=woken):
                self._stopped.wait(1.0)

    def _read_or_say_why(self, db: Database, cache: ProviderCache, *, force: bool) -> bool:
        """One refresh; False when it failed (the thread goes on: the next one retries). A database
        away (restarting, failing over) is said in a line; anything else with its traceback."""
        try:
            db.read(lambda conn: self.refresh(conn, cache, force=force))
        except Unavailable as e:
            LOG.warning("reading the host board failed (%s: %s); trying again", e, e.__cause__)
            return False
        except Exception:  # noqa: BLE001 - a failed read must not end the thread
            LOG.exception("reading the host board failed; trying again")
            return False
        return True

    def due(self) -> bool:
        """Whether the board is old: older than its refresh needs when picks read it lately; when
        none did, older than ``UNUSED_REFRESH_SECONDS`` and than its refresh's share allows, or
        than ``UNUSED_STALEST_SECONDS``."""
        now = time.monotonic()
        age = now - self._read_at
        if age < self._age_needed:
            return False
        if now - self._used_at < UNUSED_SECONDS:
            return True
        interval = max(UNUSED_REFRESH_SECONDS, self.last_refresh_seconds / UNUSED_REFRESH_SHARE)
        return age >= min(interval, UNUSED_STALEST_SECONDS)

    def catch_up_if_quiet(self) -> None:
        """When no pick read the board of a small cloud lately and it is older than a busy board
        gets, have its thread read it again now, and wait for that read up to
        ``QUIET_WAIT_SECONDS``."""
        now = time.monotonic()
        if not (self.enabled and self.background) or len(self.view.roots) > QUIET_CATCH_UP_TREES:
            return
        if now - self._used_at < UNUSED_SECONDS or now - self._read_at < self._age_needed:
            return
        with self._refreshed:
            self._wake.set()
            self._refreshed.wait_for(lambda: self._fresh_from >= now, timeout=QUIET_WAIT_SECONDS)

    def read_if_empty(self, conn: Connection, cache: ProviderCache) -> None:
        """Read the board now if it holds no tree (a worker whose board was read before the cloud
        was built, or never), waiting for a read under way: a pick on an empty board would search
        every tree inside its write transaction instead, holding every writer back."""
        if not self.enabled or len(self.view.roots) or not self._refreshing.acquire(timeout=FIRST_READ_WAIT):
            return
        try:
            if not len(self.view.roots):
                self._read(conn, cache)
                self._read_at = time.monotonic()
                self._first_read.set()
        finally:
            self._refreshing.release()

    def refresh(self, conn: Connection, cache: ProviderCache, *, force: bool = False) -> None:
        """Read the board again if it is due (or ``force``); a thread finding another refreshing
        goes on with the board as it is."""
        if not self.enabled or not (force or self.due()) or not self._refreshing.acquire(blocking=False):
            return
        try:
            self._refresh_now(conn, cache)
        finally:
            self._refreshing.release()

    def catch_up(self, conn: Connection, cache: ProviderCache) -> None:
        """Read the board again now, for a plan it fell short on: or, when another thread is
        reading it, wait for that read, which ends after the plan was made."""
        asked_at = time.monotonic()
        if not self.enabled or not self._refreshing.acquire(timeout=FIRST_READ_WAIT):
            return
        try:
            if self._read_at < asked_at:
                self._refresh_now(conn, cache)
        finally:
            self._refreshing.release()

    def _refresh_now(self, conn: Connection, cache: ProviderCache) -> None:
        started = time.monotonic()
        self._read(conn, cache)
        self._read_at = time.monotonic()
        self.last_refresh_seconds = self._read_at - started
        self._age_needed = max(self.min_age, self.last_refresh_seconds / REFRESH_SHARE)
        self._first_read.set()
        with self._refreshed:
            self._fresh_from = started
            self._refreshed.notify_all()

    def _read(self, conn: Connection, cache: ProviderCache) -> None:
        stretches = {row[0]: (row[1], row[2], row[3]) for row in fetch(conn, _STRETCH_SIGNATURES)}
        signatures, looked = self._moved_signatures(conn, stretches)
        changed = [
            root
            for root, signature in signatures.items()
            if (known := self._trees.get(root)) is None or known.signature != signature
        ]
        gone = [root for root in self._trees if looked(root) and root not in signatures]
        if not changed and not gone:
            self._stretches = stretches
            return
        weighed = weighed_classes(conn)
        members: defaultdict[int, list[ProviderData]] = defaultdict(list)
        for chunk in (changed[start : start + _CHUNK] for start in range(0, len(changed), _CHUNK)):
            loaded = cache.providers(conn, fetch(conn, _TREE_MEMBERS, ids=chunk))
            for provider in loaded.values():
                members[provider.root_id].append(provider)
        trees = dict(self._trees)
        for root in gone:
            del trees[root]
        for root in changed:
            if any(provider.id == root for provider in members[root]):
                trees[root] = _tree(signatures[root], members[root], weighed)
            else:
                trees.pop(root, None)  # deleted while being read
        updated = _updated(self.view, self._trees, trees, changed) if not gone else None
        self._trees = trees
        self.view = updated if updated is not None else _view(trees)
        # (A pool is a provider of some tree: when none changed, the pools read last still hold.)
        pools = sharing_providers(conn, cache)
        with self._pools_lock:
            self._pools = pools
        # Kept only once the trees are: a read that failed before leaves them to be read again.
        self._stretches = stretches

    def _moved_signatures(
        self, conn: Connection, stretches: Mapping[int, tuple[int, int, int]]
    ) -> tuple[dict[int, tuple[int, int, int]], Callable[[int], bool]]:
        """The signatures of the trees in the stretches of root ids whose signature (``stretches``,
        read now) moved since the last read, and which roots those stretches hold (a tree of any
        other stretch is as it was). Read after the stretches' own, so that a write committed in
        between is seen here, or by the next read as a stretch moved again."""
        moved = {
            stretch
            for stretch in stretches.keys() | self._stretches.keys()
            if stretches.get(stretch) != self._stretches.get(stretch)
        }
        if len(moved) > _MOVED_SHARE * max(1, len(stretches)):
            return {row[0]: (row[1], row[2], row[3]) for row in fetch(conn, _TREE_SIGNATURES)}, lambda root: True
        signatures: dict[int, tuple[int, int, int]] = {}
        for stretch in sorted(moved):
            lowest = stretch * _STRETCH
            for row in fetch(conn, _TREE_SIGNATURES_BETWEEN, (lowest, lowest + _STRETCH)):
                signatures[row[0]] = (row[1], row[2], row[3])
        return signatures, lambda root: root // _STRETCH in moved


def _with_used(pool: ProviderData, taken: Mapping[int, int]) -> ProviderData:
    """``pool`` with ``taken`` (class -> amount) more used."""
    inventories = dict(pool.inventories)
    for rc, amount in taken.items():
        old = inventories.get(rc)
        if old is not None:
            inventories[rc] = InventoryData(
                old.total,
                old.reserved,
                old.min_unit,
                old.max_unit,
                old.step_size,
                old.allocation_ratio,
                old.used + amount,
            )
    return dataclasses.replace(pool, inventories=inventories)


def weighed_classes(conn: Connection) -> dict[int, str]:
    """The names of the weighed classes, by id."""
    return {rc: name for name, rc in names.resource_class_ids(conn, list(_WEIGHED)).items()}


def _tree(signature: tuple[int, int, int], members: Sequence[ProviderData], weighed: Mapping[int, str]) -> _Tree:
    room: dict[int, float] = {}
    facts = {"ram": 0.0, "cpus": 0.0, "disk": 0.0}
    for provider in members:
        for rc, inventory in provider.inventories.items():
            left = headroom(inventory.total, inventory.reserved, inventory.allocation_ratio, inventory.used)
            if left > room.get(rc, -np.inf):
                room[rc] = left
            name = weighed.get(rc)
            if name is not None:
                facts[_WEIGHED[name]] += free_amount(name, inventory, inventory.used)
    aggregates = frozenset().union(*(p.aggregates for p in members))
    root_traits = next((p.traits for p in members if p.id == p.root_id), frozenset())
    return _Tree(signature, room, facts["ram"], facts["cpus"], facts["disk"], aggregates, root_traits)


def _view(trees: Mapping[int, _Tree]) -> BoardView:
    roots = sorted(trees)
    count = len(roots)
    ordered = [trees[root] for root in roots]
    room: dict[int, FloatArray] = {}
    for index, tree in enumerate(ordered):
        for rc, left in tree.room.items():
            column = room.get(rc)
            if column is None:
                column = room[rc] = np.full(count, -np.inf)
            column[index] = left
    by_aggregate: defaultdict[int, list[int]] = defaultdict(list)
    by_root_trait: defaultdict[int, list[int]] = defaultdict(list)
    for index, tree in enumerate(ordered):
        for aggregate in tree.aggregates:
            by_aggregate[aggregate].append(index)
        for trait in tree.root_traits:
            by_root_trait[trait].append(index)
    return BoardView(
        roots=np.array(roots, dtype=np.int64),
        index_of={root: index for index, root in enumerate(roots)},
        room=room,
        ram=np.array([tree.ram for tree in ordered], dtype=np.float64),
        cpus=np.array([tree.cpus for tree in ordered], dtype=np.float64),
        disk=np.array([tree.disk for tree in ordered], dtype=np.float64),
        by_aggregate={aggregate: np.array(indexes, dtype=np.intp) for aggregate, indexes in by_aggregate.items()},
        by_root_trait={trait: np.array(indexes, dtype=np.intp) for trait, indexes in by_root_trait.items()},
    )


def _updated(
    view: BoardView, before: Mapping[int, _Tree], trees: Mapping[int, _Tree], changed: Sequence[int]
) -> BoardView | None:
    """``view`` with the changed trees written in place, or None when a tree, a class, or a tree's
    aggregates or root traits are new to it (then it is made again)."""
    if len(view.roots) != len(trees):
        return None
    for root in changed:
        index, tree, old = view.index_of.get(root), trees.get(root), before.get(root)
        if index is None or tree is None or old is None:
            return None
        if old.aggregates != tree.aggregates or old.root_traits != tree.root_traits:
            return None
        if any(rc not in view.room for rc in tree.room):
            return None
    for root in changed:
        index, tree = view.index_of[root], trees[root]
        for rc, column in view.room.items():
            column[index] = tree.room.get(rc, -np.inf)
        view.ram[index], view.cpus[index], view.disk[index] = tree.ram, tree.cpus, tree.disk
    view.note_changed([view.index_of[root] for root in changed])
    return view
