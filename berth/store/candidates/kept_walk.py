"""The walk over every tree under a plain request, kept from one request to the next a stretch of
provider ids at a time.

Under a plain request (``berth.store.candidates.kept``) the walk of ``CandidateFinder`` reads, stretch
after stretch of provider ids, the providers of the driving class with whether each has room, the
member rows of the trees they belong to, and then takes each tree's kept answers. A request for a
thousand candidates reads some 1,250 trees that way, two statements and several passes over their
rows, although between two requests most of those trees did not change. So the walk is kept by
``CHUNK`` provider ids: what a stretch gave (each tree's answers, in the walk's order, with its
providers) is kept under the request's key, with the stretch's signature, and taken as it is while
the signature holds.

The signature of stretch ``c``: for each of the providers whose id is in it, and for those whose root
is in it (or in the stretch of any tree's root the stretch gave), their count and the sums of the low
and high halves of their revisions, by two grouped statements for every stretch a request needs.
Every write that changes what the walk reads moves a provider's revision (inventories, usage, traits,
aggregates, parent: ``ProviderCache``), and adds or removes a row; the sums of revisions that only
count up change with any of them (a provider deleted and another added with the very revision sum
it had is the one change they miss: about one chance in 2**62 for each such pair). A tree's answer
also depends on the sharing providers in its members' aggregates, whose revisions move without its
own: the stretch keeps those it was decided with, and must find the same copies.

A stretch where a tree had to be searched (its answers not kept) is not kept. The answers are the
same, in the same order, as the walk's: the search takes the kept answers exactly as it takes them
from the walk, and a tree that came in an earlier stretch is left out of a later one, as the walk
leaves out a root it has seen.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from sqlalchemy import Connection

from berth.domain.candidate_request import CandidateRequest
from berth.domain.candidates import Candidate, KeptAnswer, ProviderData, SearchBudget, TreeView, search
from berth.store.rawsql import fetch

# What a request takes instead of a tree's view (``berth.store.candidates.kept.Kept``).
Kept = Candidate | KeptAnswer

# Provider ids a stretch holds: a limited request of 50 needs about one (the walk's first batch is 64
# trees), one of 1,000 about 25, and a write makes the requests after it decide one stretch again.
CHUNK: Final = 64
# Stretches kept by one process, over every request key; past this many all are dropped. A stretch
# holds references to its trees' copies and answers and a dict of their providers: a few KB.
MOST_KEPT_STRETCHES: Final = 4096
# The stretches a request asks the signatures of at first, when none of its key was walked before.
FIRST_STRETCHES: Final = 2

# Each by its own lookup at one end of the primary key: SQLite reads both ends that way only when a
# statement asks for one of them (MIN and MAX together scan every row).
_LOWEST_AND_HIGHEST_ID = "SELECT (SELECT MIN(id) FROM resource_providers), (SELECT MAX(id) FROM resource_providers)"
# Both kinds in one statement: 0 by id, 1 by root.
_SIGNATURES = (
    f"SELECT 0, id / {CHUNK}, COUNT(*), SUM(revision & 4294967295), SUM(revision >> 32) "
    f"FROM resource_providers WHERE id >= ? AND id < ? GROUP BY id / {CHUNK} "
    f"UNION ALL SELECT 1, root_provider_id / {CHUNK}, COUNT(*), SUM(revision & 4294967295), SUM(revision >> 32) "
    f"FROM resource_providers WHERE root_provider_id >= ? AND root_provider_id < ? GROUP BY root_provider_id / {CHUNK}"
)

# One tree a walk read: its root, its view or kept answers (None: none), its providers.
WalkedTree = tuple[int, "TreeView | Kept | None", Sequence[ProviderData]]
Signature = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Stretch:
    """What the walk found in one stretch of provider ids, and what it depends on."""

    trees: tuple[WalkedTree, ...]
    # Every root the stretch gave, answering or not (a later stretch leaves them out).
    roots: frozenset[int]
    # Its answers one after another, when the search would take them as they are: no tree searched,
    # no answer made of sharing providers alone (which another tree may give too); else None.
    answers: tuple[Candidate, ...] | None
    # The providers of the trees that answer.
    providers: dict[int, ProviderData]
    # The sharing providers its answers name (``CandidateFinder`` reads their whole trees).
    named_sharing: frozenset[int] = frozenset()
    # Unset for a stretch that is not kept.
    signature: Signature | None = None
    # The stretches (by root) of the trees it gave, beyond its own.
    root_stretches: tuple[int, ...] = ()
    aggregates: frozenset[int] = frozenset()
    anchored: tuple[ProviderData, ...] = ()
    # What a caller made of all its answers at once, kept as long as the stretch (the API keeps the
    # pieces of its answer there): empty until made.
    made: list[object] = dataclasses.field(default_factory=list)


def walked(trees: tuple[WalkedTree, ...], sharing_ids: frozenset[int]) -> Stretch:
    """A stretch's trees as the walk read them, not yet kept."""
    answers: list[Candidate] | None = []
    providers: dict[int, ProviderData] = {}
    named: set[int] = set()
    for _, found, tree_providers in trees:
        if found is None:
            continue
        for provider in tree_providers:
            providers[provider.id] = provider
        if answers is None:
            continue
        if type(found) is Candidate:
            # A lone host's: no sharing provider is anchored to it.
            answers.append(found)
        elif type(found) is KeptAnswer:
            if found.may_repeat and any(not c.allocations.keys() - sharing_ids for c in found.candidates):
                answers = None
            else:
                answers.extend(found.candidates)
                if found.may_repeat:
                    named.update(pid for c in found.candidates for pid in c.allocations if pid in sharing_ids)
        else:
            answers = None
    return Stretch(
        trees,
        frozenset(root for root, _, _ in trees),
        tuple(answers) if answers is not None else None,
        providers,
        frozenset(named),
    )


class KeptStretches:
    """Every stretch one process keeps, by request key and stretch number; shared by its threads."""

    def __init__(self) -> None:
        self._stretches: dict[tuple[Hashable, int], Stretch] = {}
        # By request key: how many stretches its last walk used (how many signatures to ask first).
        self._used: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, number: int) -> Stretch | None:
        return self._stretches.get((key, number))

    def keep(self, key: Hashable, number: int, stretch: Stretch) -> None:
        with self._lock:
            if len(self._stretches) >= MOST_KEPT_STRETCHES:
                self._stretches.clear()
                self._used.clear()
            self._stretches[(key, number)] = stretch

    def used(self, key: Hashable) -> int:
        return self._used.get(key, FIRST_STRETCHES)

    def note_used(self, key: Hashable, count: int) -> None:
        self._used[key] = max(1, count)


class Signatures:
    """The signatures of the stretches of one request, read a run of stretches at a time."""

    def __init__(self, conn: Connection):
        self.conn = conn
        self.by_id: dict[int, Signature] = {}
        self.by_root: dict[int, Signature] = {}
        self.read_below = 0

    def read(self, first: int, count: int) -> None:
        """Read the signatures of stretches ``first`` to ``first + count - 1`` (both kinds)."""
        low, high = first * CHUNK, (first + count) * CHUNK
        by_id, by_root = self.by_id, self.by_root
        for kind, number, rows, low_sum, high_sum in fetch(self.conn, _SIGNATURES, (low, high, low, high)):
            (by_root if kind else by_id)[int(number)] = (int(rows), int(low_sum), int(high_sum))
        self.read_below = max(self.read_below, first + count)

    def holds_any(self, number: int) -> bool:
        """Whether a provider's id is in the stretch (else it has nothing to walk)."""
        return number in self.by_id

    def of(self, number: int, root_stretches: Sequence[int]) -> Signature | None:
        """The signature of a stretch and of the root stretches of the trees it gave; None when one
        of them was not read (a tree whose root lies in a stretch beyond those read)."""
        if any(stretch >= self.read_below for stretch in root_stretches):
            return None
        return (
            self.by_id.get(number),
            self.by_root.get(number),
            tuple(self.by_root.get(stretch) for stretch in root_stretches),
        )


class Walker(Protocol):
    """What the walk asks of the request's finder (``CandidateFinder``)."""

    conn: Connection
    request: CandidateRequest
    want: int
    budget: SearchBudget
    providers: dict[int, ProviderData]
    sharing: dict[int, ProviderData]

    @property
    def cache(self) -> _KeepsStretches: ...

    def driving_statement(self) -> tuple[str, str, list[int]]: ...

    def root_batches_between(
        self, statement: tuple[str, str, list[int]], lower: int, upper: int | None, seen_roots: set[int]
    ) -> Iterator[list[int]]: ...

    def decided(self, root_ids: list[int]) -> Iterator[WalkedTree]: ...


class _KeepsStretches(Protocol):
    @property
    def stretches(self) -> KeptStretches: ...


class TreeAnswers(Protocol):
    """What the walk asks of the request's kept answers (``KeptAnswers``)."""

    key: Hashable

    def anchored_to(self, aggregates: frozenset[int]) -> tuple[ProviderData, ...]: ...


# A run of the candidates found: how many came from one stretch's answers taken as they are, the
# stretch (None: from a search).
Run = tuple["Stretch | None", int]


class KeptWalk:
    """One request's walk over every tree, stretch by stretch, each taken as kept while it holds."""

    def __init__(self, finder: Walker, kept: TreeAnswers):
        # The runs of the candidates found, in order (``Run``).
        self.runs: list[Run] = []
        self.finder = finder
        self.kept = kept
        self.key = kept.key
        self.stretches: KeptStretches = finder.cache.stretches
        self.signatures = Signatures(finder.conn)
        self.statement = finder.driving_statement()
        self.sharing_ids = frozenset(finder.sharing)

    def find(self) -> list[Candidate]:
        """The candidates, up to the finder's limit and within its budget, as its walk gives them."""
        finder = self.finder
        want, budget, providers = finder.want, finder.budget, finder.providers
        results: list[Candidate] = []
        seen_keys: set[Any] = set()
        seen_roots: set[int] = set()
        for stretch in self._stretches():
            answers = stretch.answers
            if answers is not None and len(answers) <= budget.remaining and seen_roots.isdisjoint(stretch.roots):
                # As the search would take them: each answer for a step, the first ones up to the limit.
                taken = answers[: want - len(results)]
                results.extend(taken)
                self.runs.append((stretch, len(taken)))
                budget.remaining -= len(answers)
                providers.update(stretch.providers)
                seen_roots.update(stretch.roots)
            else:
                found = search(
                    _answers_in_order(stretch.trees, providers, seen_roots),
                    finder.request,
                    limit=want - len(results),
                    budget=budget,
                    seen=seen_keys,
                    sharing_ids=self.sharing_ids,
                )
                results += found
                self.runs.append((None, len(found)))
            if len(results) >= want or budget.remaining < 0:
                break
        return results

    def _stretches(self) -> Iterator[Stretch]:
        lowest, highest = fetch(self.finder.conn, _LOWEST_AND_HIGHEST_ID)[0]
        first, last = (lowest or 0) // CHUNK, (highest or 0) // CHUNK
        number, count, used = first, self.stretches.used(self.key), 0
        try:
            while number <= last:
                self.signatures.read(number, count)
                for stretch in range(number, min(number + count, last + 1)):
                    used = stretch + 1 - first
                    if self.signatures.holds_any(stretch):
                        yield self._stretch(stretch)
                number += count
                count *= 2
        finally:
            self.stretches.note_used(self.key, used)

    def _stretch(self, number: int) -> Stretch:
        """One stretch of provider ids: as kept, while its signature holds and its anchored sharing
        providers are the same copies; else walked as the walk does, and kept when no tree of it had
        to be searched."""
        kept = self.stretches.get(self.key, number)
        if kept is not None and self.signatures.of(number, kept.root_stretches) == kept.signature:
            anchored = self.kept.anchored_to(kept.aggregates) if kept.aggregates else ()
            if len(anchored) == len(kept.anchored) and all(
                a is b for a, b in zip(anchored, kept.anchored, strict=True)
            ):
                return kept
        finder = self.finder
        lower, upper = number * CHUNK - 1, (number + 1) * CHUNK
        roots = [root for batch in finder.root_batches_between(self.statement, lower, upper, set()) for root in batch]
        trees = tuple(finder.decided(roots)) if roots else ()
        stretch = walked(trees, self.sharing_ids)
        if all(type(found) is not TreeView for _, found, _ in trees):
            root_stretches = tuple(sorted({root // CHUNK for root, _, _ in trees} - {number}))
            signature = self.signatures.of(number, root_stretches)
            if signature is not None:
                aggregates = _aggregates_of(trees)
                anchored = self.kept.anchored_to(aggregates) if aggregates else ()
                stretch = dataclasses.replace(
                    stretch,
                    signature=signature,
                    root_stretches=root_stretches,
                    aggregates=aggregates,
                    anchored=anchored,
                )
                self.stretches.keep(self.key, number, stretch)
        return stretch


def _aggregates_of(trees: Sequence[WalkedTree]) -> frozenset[int]:
    """Every aggregate a provider of these trees is in."""
    found: set[int] = set()
    for _, _, providers in trees:
        for provider in providers:
            if provider.aggregates:
                found.update(provider.aggregates)
    return frozenset(found)


def _answers_in_order(
    trees: Sequence[WalkedTree], providers: dict[int, ProviderData], seen: set[int]
) -> Iterator[TreeView | Kept]:
    """The trees' views and answers in order, each tree once (not if an earlier stretch gave it),
    the providers of those that answer added to ``providers``."""
    for root, found, tree_providers in trees:
        if root in seen:
            continue
        seen.add(root)
        if found is not None:
            for provider in tree_providers:
                providers[provider.id] = provider
            yield found
