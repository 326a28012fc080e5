"""An allocation candidate request as the search answers it: request groups of ids.

Built by the store from a ``CandidateQuery`` (``berth.store.candidates.names.resolve``); never
changed once built, so the search may work out what it asks of it at every tree only once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property


@dataclass(frozen=True)
class RequestGroup:
    suffix: str
    # resource class id -> amount, in the order asked
    resources: Mapping[int, int] = field(default_factory=dict)
    # Each inner set is an any-of set of trait ids; all sets must be met.
    required: Sequence[frozenset[int]] = ()
    forbidden: frozenset[int] = frozenset()
    # Each inner set is an any-of set of aggregate ids; all sets must be met.
    member_of: Sequence[frozenset[int]] = ()
    forbidden_aggregates: frozenset[int] = frozenset()
    in_tree_root: int | None = None
    # An in_tree naming a provider that does not exist can match nothing.
    impossible: bool = False


@dataclass(frozen=True)
class CandidateRequest:
    groups: Sequence[RequestGroup]
    isolate: bool = False
    # Sets of suffixes whose providers must share one subtree.
    same_subtree: Sequence[Sequence[str]] = ()
    root_required: Sequence[frozenset[int]] = ()
    root_forbidden: frozenset[int] = frozenset()
    # Before microversion 1.29 an answer may use only one provider of each tree.
    one_provider_per_tree: bool = False

    # The search asks for these at every tree.
    @cached_property
    def unsuffixed(self) -> RequestGroup | None:
        return next((g for g in self.groups if g.suffix == ""), None)

    @cached_property
    def suffixed(self) -> list[RequestGroup]:
        return [g for g in self.groups if g.suffix != ""]

    @cached_property
    def plain_resources(self) -> list[tuple[int, int]] | None:
        """The (class, amount) pairs of the commonest request, one unsuffixed group of resources with
        nothing else to check (no traits, aggregates, tree or root conditions); None for any other."""
        if self.root_required or self.root_forbidden:
            return None
        return self.weighable_resources

    @cached_property
    def weighable_resources(self) -> list[tuple[int, int]] | None:
        """As ``plain_resources``, but the root's traits may be asked too: the host board weighs
        such a request, deciding the root's traits itself (Nova asks every request with
        ``root_required``, a disabled compute node's trait forbidden)."""
        group = self.unsuffixed
        if group is None or self.suffixed or not group.resources or group.impossible:
            return None
        if (
            group.required
            or group.forbidden
            or group.member_of
            or group.forbidden_aggregates
            or group.in_tree_root is not None
        ):
            return None
        if self.same_subtree or self.one_provider_per_tree:
            return None
        return list(group.resources.items())

    @cached_property
    def board_amounts(self) -> list[tuple[int, int]] | None:
        """What a single pick's plan on the host board asks of every tree: for each class, the
        most that any one group asks. Each group takes a class from one provider, so a tree with
        no provider (nor sharing provider) with that much room cannot serve the request; what else
        it asks (granular groups, forbidden traits, ``same_subtree``) only leaves fewer trees, and
        the search of each tree the plan tries applies it. None when no group asks resources, one
        can match nothing, or the request asks what few trees may have: a tree (``in_tree``),
        traits, (a granular group) aggregates, or a provider of its own for each group
        (``isolate``: most hosts have one provider of each class). The board cannot tell those
        trees, and searching the best trees one by one in the pick's write for them would hold
        every other writer back."""
        if self.isolate:
            return None
        amounts: dict[int, int] = {}
        for group in self.groups:
            if group.impossible or group.in_tree_root is not None or group.required:
                return None
            if group.suffix and group.member_of:
                return None
            for rc, amount in group.resources.items():
                amounts[rc] = max(amounts.get(rc, 0), amount)
        return list(amounts.items()) or None
