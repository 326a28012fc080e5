"""The answers of trees to a plain request, kept with their roots' copies from one request to the next.

Under a plain request (one group of resources and nothing else, ``CandidateRequest.plain_resources``)
the answers of a tree depend on the copies of its providers, on those of the sharing providers
anchored to it, and on the amounts asked: nothing else.  The finder keeps them with the copy of the
tree's root (``ProviderCache.keep_answer``) under a key of the amounts and of what the caller makes
of answers, and a later request takes them from there instead of deciding them again while all of
that is as it was:

- a lone host (a tree of one provider, no sharing provider anchored to it) keeps its one answer or
  none; the copy of its row being current is enough;
- any other tree keeps ``KeptTree``: the member rows (id, parent, root, revision) it was decided
  from, which must all be read again unchanged (a member changed, added, moved or gone moves them),
  and the sharing providers anchored to it, which must be the same copies: a sharing provider
  joining or leaving one of the tree's aggregates, or changing, does not move the tree's rows.

Trees with more than ``MOST_KEPT`` answers are not kept.  The answers of a tree with a sharing
provider of its own, or sharing providers anchored to it, may come from other trees too; the search
takes them once, as it does for the trees it searches itself.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from berth.domain.candidates import (
    Candidate,
    KeptAnswer,
    KeptPieces,
    ProviderData,
    TreeView,
    lone_host_candidate,
    plain_tree_answer,
)
from berth.store.candidates.provider_cache import MemberRow, ProviderCache

# Most answers of one tree kept: a tree of many interchangeable providers is decided each time.
MOST_KEPT: Final = 64

# What a request takes instead of a tree's view: a lone host's answer, or every answer of a tree.
Kept = Candidate | KeptAnswer


@dataclass(slots=True)
class KeptTree:
    """The answers of a tree that is not a lone host, and what they were decided from."""

    rows: list[MemberRow]
    members: list[ProviderData]
    # Of all its members: where sharing providers may be anchored to it.
    aggregates: frozenset[int]
    # The sharing providers in those aggregates, its own included (``KeptAnswers.anchored_to``).
    anchored: tuple[ProviderData, ...]
    answer: KeptAnswer | None


class KeptAnswers:
    """One request's reading and keeping of trees' answers in ``cache`` under ``key``."""

    def __init__(
        self,
        cache: ProviderCache,
        key: Hashable,
        resources: Sequence[tuple[int, int]],
        sharing: Mapping[int, ProviderData],
        sharing_by_aggregate: Mapping[int, Sequence[ProviderData]],
    ):
        self.cache = cache
        self.key = key
        self.resources = resources
        self.sharing = sharing
        self.sharing_by_aggregate = sharing_by_aggregate
        self._anchored: dict[frozenset[int], tuple[ProviderData, ...]] = {}

    def anchored_to(self, aggregates: frozenset[int]) -> tuple[ProviderData, ...]:
        """The sharing providers in one of these aggregates, in id order (once per request and set)."""
        found = self._anchored.get(aggregates)
        if found is None:
            by_aggregate = self.sharing_by_aggregate
            ids = {s.id for a in aggregates for s in by_aggregate.get(a, ())}
            sharing = self.sharing
            found = self._anchored[aggregates] = tuple(sharing[i] for i in sorted(ids))
        return found

    def split(
        self, rows: Sequence[MemberRow]
    ) -> tuple[list[MemberRow], dict[int, tuple[list[ProviderData], Kept | None]], dict[int, list[MemberRow]]]:
        """The rows of the trees to load and view, by root the providers and kept answer (None: no
        answer) of each tree whose answer still holds, and by root the rows of the other trees."""
        found = self.cache.kept_of_roots(rows, self.key)
        children: dict[int, list[MemberRow]] = {}
        for row in rows:
            if row[0] != row[2]:
                tree = children.get(row[2])
                if tree is None:
                    children[row[2]] = [row]
                else:
                    tree.append(row)
        sharing, anchored_to = self.sharing, self.anchored_to
        kept: dict[int, tuple[list[ProviderData], Kept | None]] = {}
        rest: list[MemberRow] = []
        others: dict[int, list[MemberRow]] = {}
        for row in rows:
            root_id = row[2]
            if row[0] != root_id:
                continue
            tree_children = children.pop(root_id, None) if children else None
            kept_here = found.get(root_id)
            if tree_children is None:
                if kept_here is not None:
                    provider, value = kept_here
                    if type(value) is not KeptTree:
                        # A lone host's: it holds while no sharing provider is anchored to it.
                        if not sharing or (
                            root_id not in sharing and not (provider.aggregates and anchored_to(provider.aggregates))
                        ):
                            kept[root_id] = ([provider], value)
                            continue
                    elif self._holds(value, [row]):
                        kept[root_id] = (value.members, value.answer)
                        continue
                tree_rows = [row]
            else:
                tree_rows = [row, *tree_children]
                tree_rows.sort()
                if kept_here is not None and type(kept_here[1]) is KeptTree and self._holds(kept_here[1], tree_rows):
                    kept[root_id] = (kept_here[1].members, kept_here[1].answer)
                    continue
            others[root_id] = tree_rows
            rest.extend(tree_rows)
        # Members whose root was not read (deleted since): loaded, and left out by the views.
        for orphans in children.values():
            rest.extend(orphans)
        return rest, kept, others

    def _holds(self, tree: KeptTree, rows: list[MemberRow]) -> bool:
        if rows != tree.rows:
            return False
        if not tree.aggregates or not self.sharing:
            return not tree.anchored
        anchored = self.anchored_to(tree.aggregates)
        # The same copies (``is``): a copy's equality does not compare usage.
        return len(anchored) == len(tree.anchored) and all(a is b for a, b in zip(anchored, tree.anchored, strict=True))

    def decide(
        self, root: ProviderData, members: list[ProviderData], anchored: list[ProviderData], rows: list[MemberRow]
    ) -> Kept | None | Literal[False]:
        """The answer of a tree (its members in id order, the sharing providers anchored to it, its
        rows as ``split`` gave them), kept with its root's copy for later requests; False when such
        a tree's answer is not kept, and the search must decide it itself."""
        sharing = self.sharing
        # A sharing provider of its own: its answers made of sharing providers alone may come from
        # other trees too, which the search sorts out as for any tree that may repeat one.
        own_sharing = bool(sharing) and any(p.id in sharing for p in members)
        if len(members) == 1 and not anchored and not own_sharing:
            candidate = lone_host_candidate(root, self.resources)
            if candidate is not None:
                candidate.kept = KeptPieces((root.id,))
            self.cache.keep_answer(root, self.key, candidate)
            return candidate
        found = plain_tree_answer(TreeView(root, members, anchored), self.resources, MOST_KEPT)
        if found is None:
            return False
        tree = tuple(p.id for p in members)
        for candidate in found:
            candidate.kept = KeptPieces(tree)
        answer = KeptAnswer(found, bool(anchored) or own_sharing) if found else None
        aggregates = frozenset().union(*(p.aggregates for p in members))
        # Every sharing provider in the tree's aggregates, its own included: while they are the same
        # copies, so are those anchored to it (the others).
        in_aggregates = self.anchored_to(aggregates) if aggregates and sharing else ()
        kept = KeptTree(rows, members, aggregates, in_aggregates, answer)
        self.cache.keep_answer(root, self.key, kept)
        return answer
