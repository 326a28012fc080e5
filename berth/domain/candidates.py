"""Allocation candidate search over provider trees held in memory.

The store loads a batch of whole trees (providers, inventories with their maintained usage, traits,
aggregates) plus the sharing providers anchored to them; this module decides, per tree, every way the
request groups can be placed, and stops as soon as the caller has enough.

Semantics, as the Placement API defines them:

- The unsuffixed group may spread its resources over several providers of one tree (and sharing
  providers anchored to it), one provider per resource class; its required traits must be found on
  the union of the providers that serve it, its forbidden traits on none of them.
- Each suffixed group is served whole by a single provider, which must itself carry the group's
  traits and aggregates.  A suffixed group without resources (1.36) names a provider of the tree
  that carries its traits, and appears in the mappings only.
- ``group_policy=isolate`` puts each suffixed group on a different provider.
- A suffixed group's provider must itself be in every ``member_of`` of the group and in none of
  its forbidden aggregates.  For the unsuffixed group, each provider serving it, or the root of its
  tree, must be in every ``member_of`` (a sharing provider must be in them itself): one clause met
  by the provider and another by the root is not enough.  Neither the provider nor the root of the
  tree it serves (a sharing provider's anchor) may be in a forbidden aggregate.
- Amounts that several groups place on one provider are added up and must fit there together:
  a candidate is only returned if it could be written as it stands.

The search is a depth-first walk over "slots" (each unsuffixed resource class, then each suffixed
group), with the per-provider running totals checked at every step, so the first ``limit`` answers
are found without enumerating the whole product of choices.  A step budget bounds pathological
requests; a perfect-matching check skips trees where ``isolate`` cannot be satisfied at all.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import product
from typing import NamedTuple, TypeAlias

from berth.domain.candidate_request import CandidateRequest, RequestGroup
from berth.domain.capacity import Inventory


class InventoryData(Inventory):
    """One inventory as the search sees it, with the units still free worked out once (the search
    asks for them at every step, and a request can load thousands of these)."""

    __slots__ = ("used", "free")

    def __init__(
        self,
        total: int,
        reserved: int,
        min_unit: int,
        max_unit: int,
        step_size: int,
        allocation_ratio: float,
        used: int,
    ):
        super().__init__(total, reserved, min_unit, max_unit, step_size, allocation_ratio)
        self.used = used
        self.free = self.capacity - used

    def __repr__(self) -> str:
        return f"InventoryData(total={self.total}, reserved={self.reserved}, used={self.used}, free={self.free})"

    def can_take(self, amount: int, already: int = 0) -> bool:
        """Room for ``amount`` more on top of ``already`` placed by this same candidate: the rule of
        ``Inventory.can_allocate``, with the minimum applying to each request group's part and the
        maximum and step to what the candidate puts on this inventory in all."""
        combined = already + amount
        return (
            self.min_unit <= amount
            and combined <= self.max_unit
            and combined % self.step_size == 0
            and combined <= self.free
        )


@dataclass(slots=True)
class ProviderData:
    id: int
    uuid: str
    parent_id: int | None
    root_id: int
    inventories: dict[int, InventoryData] = field(default_factory=dict)
    traits: frozenset[int] = frozenset()
    aggregates: frozenset[int] = frozenset()


# A candidate's allocations and mappings in a canonical, hashable form.
CandidateKey: TypeAlias = tuple[
    tuple[tuple[int, tuple[tuple[int, int], ...]], ...], tuple[tuple[str, tuple[int, ...]], ...]
]


class KeptPieces:
    """What a caller made of a candidate kept from one request to the next (an answer of a tree
    kept with its root's copy): made once, then read as it is.  ``tree``: the ids of the tree's own
    providers, in id order (the answer may name sharing providers of other trees too)."""

    __slots__ = ("value", "tree")

    def __init__(self, tree: tuple[int, ...]) -> None:
        self.value: object = None
        self.tree = tree


@dataclass(slots=True)
class Candidate:
    # provider id -> resource class id -> amount
    allocations: dict[int, dict[int, int]]
    # suffix -> provider ids serving that group
    mappings: dict[str, list[int]]
    # Set only on an answer kept with its tree's root's copy (``lone_host_candidate``,
    # ``KeptAnswer``), which requests share and must not change.
    kept: KeptPieces | None = field(default=None, compare=False, repr=False)

    def key(self) -> CandidateKey:
        return (
            tuple(sorted((p, tuple(sorted(r.items()))) for p, r in self.allocations.items())),
            tuple(sorted((s, tuple(ps)) for s, ps in self.mappings.items())),
        )


@dataclass(slots=True)
class KeptAnswer:
    """Every answer of one tree to a plain request (``plain_tree_answer``), decided by an earlier
    request and kept while nothing it was decided from has changed: the search takes it as it is,
    for the steps deciding it would have cost.  ``may_repeat``: sharing providers are anchored to
    the tree, so an answer made of them alone may come from another tree too."""

    candidates: list[Candidate]
    may_repeat: bool


class SearchBudget:
    """Counts search steps across a whole request, so no request can run away."""

    def __init__(self, steps: int):
        self.remaining = steps

    def spend(self) -> bool:
        self.remaining -= 1
        return self.remaining >= 0


def _in_every(aggregates: frozenset[int], member_of: Sequence[frozenset[int]]) -> bool:
    """Whether ``aggregates`` meet every any-of set of ``member_of``."""
    return all(aggregates & any_of for any_of in member_of)


def _traits_ok(traits: frozenset[int], required: Collection[frozenset[int]], forbidden: frozenset[int]) -> bool:
    return all(traits & any_of for any_of in required) and not (traits & forbidden)


class TreeView:
    """One tree with the sharing providers anchored to it."""

    def __init__(self, root: ProviderData, members: list[ProviderData], sharing: list[ProviderData]):
        self.root = root
        self.members = members
        self.sharing = sharing
        # Every provider that may serve a group with resources: the tree's own, then the shared.
        self.pool = members + sharing if sharing else members

    @cached_property
    def by_id(self) -> dict[int, ProviderData]:
        # Only the general walk needs it: built on first use, not for every tree of a batch.
        by_id = {p.id: p for p in self.members}
        for p in self.sharing:
            by_id.setdefault(p.id, p)
        return by_id

    def in_group_scope(self, provider: ProviderData, group: RequestGroup) -> bool:
        if group.in_tree_root is not None and provider.root_id != group.in_tree_root:
            return False
        if group.member_of or group.forbidden_aggregates:
            own = provider.aggregates
            if group.suffix:
                # A suffixed group's provider must be in the aggregates itself.
                return _in_every(own, group.member_of) and not own & group.forbidden_aggregates
            # The unsuffixed group's provider, or the root of its tree, must be in every member_of
            # by itself: one clause met by the provider and another by the root is not enough.  A
            # sharing provider must be in them itself.  Neither the provider nor the root of the
            # tree it serves (a sharing provider's anchor) may be in a forbidden aggregate.
            root = self.root.aggregates
            in_own_tree = provider.root_id == self.root.id
            if not (_in_every(own, group.member_of) or (in_own_tree and _in_every(root, group.member_of))):
                return False
            if (own | root) & group.forbidden_aggregates:
                return False
        return True

    def ancestors_or_self(self, provider_id: int) -> list[int]:
        chain: list[int] = []
        current = self.by_id.get(provider_id)
        while current is not None:
            chain.append(current.id)
            current = self.by_id.get(current.parent_id) if current.parent_id is not None else None
        return chain


def _group_candidates(tree: TreeView, group: RequestGroup) -> list[ProviderData]:
    """Providers that can serve a suffixed group all by themselves."""
    pool = tree.pool if group.resources else tree.members
    found = []
    for provider in pool:
        if not tree.in_group_scope(provider, group):
            continue
        if not _traits_ok(provider.traits, group.required, group.forbidden):
            continue
        if all(
            rc in provider.inventories and provider.inventories[rc].can_take(amount)
            for rc, amount in group.resources.items()
        ):
            found.append(provider)
    return found


def _class_candidates(tree: TreeView, group: RequestGroup, rc: int, amount: int) -> list[ProviderData]:
    """Providers that can serve one resource class of the unsuffixed group."""
    scoped = group.in_tree_root is not None or group.member_of or group.forbidden_aggregates
    forbidden = group.forbidden
    found = []
    for provider in tree.pool:
        inventory = provider.inventories.get(rc)
        if inventory is None or not inventory.can_take(amount):
            continue
        if (scoped and not tree.in_group_scope(provider, group)) or (forbidden and provider.traits & forbidden):
            continue
        found.append(provider)
    return found


def _isolation_possible(options: list[list[ProviderData]]) -> bool:
    """Whether every group can get a provider of its own (a perfect matching exists)."""
    match: dict[int, int] = {}

    def assign(group_index: int, seen: set[int]) -> bool:
        for provider in options[group_index]:
            if provider.id in seen:
                continue
            seen.add(provider.id)
            if provider.id not in match or assign(match[provider.id], seen):
                match[provider.id] = group_index
                return True
        return False

    return all(assign(i, set()) for i in range(len(options)))


def search_tree(
    tree: TreeView, request: CandidateRequest, budget: SearchBudget, shortcut: bool = True
) -> Iterator[Candidate]:
    """Every way to place the request on this tree, in order.  ``shortcut=False`` forces the
    general walk even where a cheaper equivalent exists (the tests compare the two)."""
    if shortcut and request.plain_resources is not None:
        yield from _plain_candidates(tree.pool, request.plain_resources, budget)
        return
    if (request.root_required or request.root_forbidden) and not _traits_ok(
        tree.root.traits, request.root_required, request.root_forbidden
    ):
        return
    unsuffixed = request.unsuffixed
    unsuffixed_options = _unsuffixed_options(tree, unsuffixed) if unsuffixed is not None else []
    if unsuffixed_options is None:
        return
    suffixed_options = _suffixed_options(tree, request.suffixed) if request.suffixed else []
    if suffixed_options is None:
        return
    if request.isolate and len(suffixed_options) > 1 and not _isolation_possible(suffixed_options):
        return
    if shortcut and unsuffixed is not None and unsuffixed.resources and not suffixed_options:
        yield from _unsuffixed_only(tree, request, unsuffixed, unsuffixed_options, budget)
        return
    yield from _Walk(tree, request, _slots(request, unsuffixed_options, suffixed_options), budget).walk(0)


def _unsuffixed_options(tree: TreeView, group: RequestGroup) -> list[list[ProviderData]] | None:
    """The providers that may serve each class of the unsuffixed group (or the group, if it has
    only traits or aggregates); None when one of them has none in this tree."""
    if group.impossible:
        return None
    found = []
    for rc, amount in group.resources.items():
        options = _class_candidates(tree, group, rc, amount)
        if not options:
            return None
        found.append(options)
    if not group.resources and (group.required or group.forbidden or group.member_of):
        options = _group_candidates(tree, group)
        if not options:
            return None
        found.append(options)
    return found


def _suffixed_options(tree: TreeView, groups: Sequence[RequestGroup]) -> list[list[ProviderData]] | None:
    """The providers that may serve each suffixed group; None when one of them has none."""
    found = []
    for group in groups:
        if group.impossible:
            return None
        options = _group_candidates(tree, group)
        if not options:
            return None
        found.append(options)
    return found


class _Slot(NamedTuple):
    """One step of the walk: a provider to choose among ``options`` for what it places."""

    group: RequestGroup
    # What the chosen provider takes: one class of the unsuffixed group, or a group's resources.
    wanted: Mapping[int, int]
    options: list[ProviderData]
    # A whole group on one provider (a suffixed group, or an unsuffixed one without resources).
    whole_group: bool


def _slots(
    request: CandidateRequest,
    unsuffixed_options: list[list[ProviderData]],
    suffixed_options: list[list[ProviderData]],
) -> list[_Slot]:
    """The steps of the walk: the unsuffixed group's, then the suffixed groups, the most
    constrained first (fewer dead ends early in the walk)."""
    slots = []
    unsuffixed = request.unsuffixed
    if unsuffixed is not None and unsuffixed.resources:
        for (rc, amount), options in zip(unsuffixed.resources.items(), unsuffixed_options, strict=True):
            slots.append(_Slot(unsuffixed, {rc: amount}, options, False))
    elif unsuffixed is not None and unsuffixed_options:
        slots.append(_Slot(unsuffixed, unsuffixed.resources, unsuffixed_options[0], True))
    groups = [
        _Slot(group, group.resources, options, True)
        for group, options in zip(request.suffixed, suffixed_options, strict=True)
    ]
    groups.sort(key=lambda slot: len(slot.options))
    return slots + groups


class _Walk:
    """The depth-first walk over the slots, with the amounts placed so far on each provider."""

    def __init__(self, tree: TreeView, request: CandidateRequest, slots: list[_Slot], budget: SearchBudget):
        self.tree = tree
        self.request = request
        self.slots = slots
        self.budget = budget
        self.placed: dict[int, dict[int, int]] = {}
        self.chosen: list[ProviderData | None] = [None] * len(slots)
        # Providers taken by a suffixed group, under group_policy=isolate.
        self.isolated_used: set[int] = set()

    def walk(self, index: int) -> Iterator[Candidate]:
        if index == len(self.slots):
            candidate = self._finish()
            if candidate is not None:
                yield candidate
            return
        slot = self.slots[index]
        isolating = slot.whole_group and bool(slot.group.suffix) and self.request.isolate
        wanted = slot.wanted
        budget = self.budget
        for provider in slot.options:
            if not budget.spend():
                return
            if isolating and provider.id in self.isolated_used:
                continue
            on_provider = self.placed.setdefault(provider.id, {})
            if not all(provider.inventories[c].can_take(a, on_provider.get(c, 0)) for c, a in wanted.items()):
                continue
            for c, a in wanted.items():
                on_provider[c] = on_provider.get(c, 0) + a
            self.chosen[index] = provider
            if isolating:
                self.isolated_used.add(provider.id)
            yield from self.walk(index + 1)
            if isolating:
                self.isolated_used.discard(provider.id)
            for c, a in wanted.items():
                on_provider[c] -= a
                if not on_provider[c]:
                    del on_provider[c]
            if budget.remaining < 0:
                return

    def _finish(self) -> Candidate | None:
        """The candidate the choices make, unless a condition on the whole of it fails."""
        mappings: dict[str, list[int]] = {}
        unsuffixed_providers = []
        for slot, provider in zip(self.slots, self.chosen, strict=True):
            assert provider is not None  # every slot has its choice once the walk reaches the end
            suffix = slot.group.suffix
            ids = mappings.setdefault(suffix, [])
            if provider.id not in ids:
                ids.append(provider.id)
            if suffix == "":
                unsuffixed_providers.append(provider)
        unsuffixed = self.request.unsuffixed
        if unsuffixed is not None and unsuffixed.resources and (unsuffixed.required or unsuffixed.forbidden):
            union: frozenset[int] = frozenset().union(*(p.traits for p in unsuffixed_providers))
            if not _traits_ok(union, unsuffixed.required, unsuffixed.forbidden):
                return None
        if not _whole_answer_fits(self.tree, self.request, mappings):
            return None
        return Candidate({p: dict(r) for p, r in self.placed.items() if r}, mappings)


def _whole_answer_fits(tree: TreeView, request: CandidateRequest, mappings: Mapping[str, list[int]]) -> bool:
    """The conditions on an answer's providers together: one per tree before 1.29, and
    ``same_subtree``."""
    if request.one_provider_per_tree:
        in_tree = {pid for ids in mappings.values() for pid in ids if tree.by_id[pid].root_id == tree.root.id}
        if len(in_tree) > 1:
            return False
    for suffixes in request.same_subtree:
        providers = [pid for s in suffixes for pid in mappings.get(s, [])]
        if not _in_one_subtree(tree, providers):
            return False
    return True


def _unsuffixed_only(
    tree: TreeView,
    request: CandidateRequest,
    group: RequestGroup,
    options: list[list[ProviderData]],
    budget: SearchBudget,
) -> Iterator[Candidate]:
    """The walk for a request of one unsuffixed group with resources and nothing else but traits,
    aggregates and conditions on the whole answer.

    Its classes are distinct, so no two of them can compete for the same inventory: every option
    already passed its own capacity check, and the answers are exactly the product of the options,
    in the order the depth-first walk would give them, at a fraction of its cost.
    """
    check_traits = bool(group.required or group.forbidden)
    classes = list(group.resources.items())
    whole_answer_checks = request.one_provider_per_tree or bool(request.same_subtree)
    for combination in product(*options):
        budget.remaining -= 1
        if budget.remaining < 0:
            return
        allocations: dict[int, dict[int, int]] = {}
        for (rc, amount), provider in zip(classes, combination, strict=True):
            allocations.setdefault(provider.id, {})[rc] = amount
        if check_traits:
            union: frozenset[int] = frozenset().union(*(p.traits for p in combination))
            if not _traits_ok(union, group.required, group.forbidden):
                continue
        mappings = {"": list(allocations)}
        if whole_answer_checks and not _whole_answer_fits(tree, request, mappings):
            continue
        yield Candidate(allocations, mappings)


def lone_host_candidate(provider: ProviderData, resources: Sequence[tuple[int, int]]) -> Candidate | None:
    """The only answer to a plain request of a tree of this one provider with no sharing provider
    anchored to it: everything on the provider, if it has room for every class."""
    inventories = provider.inventories
    for rc, amount in resources:
        inventory = inventories.get(rc)
        if (
            inventory is None
            or not inventory.min_unit <= amount <= inventory.max_unit
            or amount > inventory.free
            or amount % inventory.step_size
        ):
            return None
    return Candidate({provider.id: dict(resources)}, {"": [provider.id]})


def plain_tree_answer(tree: TreeView, resources: Sequence[tuple[int, int]], most: int) -> list[Candidate] | None:
    """Every answer of this tree to a plain request (``CandidateRequest.plain_resources``), in the
    search's order; None when there are more than ``most``."""
    budget = SearchBudget(most)
    found = _plain_candidates(tree.pool, resources, budget)
    return found if budget.remaining >= 0 else None


def _plain_candidates(
    pool: list[ProviderData], resources: Sequence[tuple[int, int]], budget: SearchBudget
) -> list[Candidate]:
    """The walk for a plain request (``CandidateRequest.plain_resources``), a list rather than a
    generator and with the capacity test written out: an unlimited request runs it for every tree
    of a thousand, and what it does per tree is the whole of its cost.

    Its classes are distinct, so no two of them can compete for one inventory: the answers are the
    product of each class's options, in the order the depth-first walk gives them.
    """
    if len(pool) == 1:
        # A host by itself with no sharing provider anchored to it, the commonest tree: it serves
        # every class or there is no answer, without the options of the general case.
        candidate = lone_host_candidate(pool[0], resources)
        if candidate is None:
            return []
        budget.remaining -= 1
        if budget.remaining < 0:
            return []
        return [candidate]
    options: list[list[ProviderData]] = []
    only_choices = True
    for rc, amount in resources:
        found = []
        for provider in pool:
            inventory = provider.inventories.get(rc)
            if (
                inventory is not None
                and inventory.min_unit <= amount <= inventory.max_unit
                and amount <= inventory.free
                and amount % inventory.step_size == 0
            ):
                found.append(provider)
        if not found:
            return []
        if len(found) > 1 or (options and found[0] is not options[0][0]):
            only_choices = False
        options.append(found)
    if only_choices:
        # One provider holds every class, and it alone: the commonest tree, a host by itself.
        budget.remaining -= 1
        if budget.remaining < 0:
            return []
        provider_id = options[0][0].id
        return [Candidate({provider_id: dict(resources)}, {"": [provider_id]})]
    found_candidates = []
    for combination in product(*options):
        budget.remaining -= 1
        if budget.remaining < 0:
            break
        allocations: dict[int, dict[int, int]] = {}
        for (rc, amount), provider in zip(resources, combination, strict=True):
            on_provider = allocations.get(provider.id)
            if on_provider is None:
                allocations[provider.id] = {rc: amount}
            else:
                on_provider[rc] = amount
        found_candidates.append(Candidate(allocations, {"": list(allocations)}))
    return found_candidates


def _in_one_subtree(tree: TreeView, provider_ids: list[int]) -> bool:
    """One of these providers is an ancestor of (or is) every other one."""
    if len(provider_ids) <= 1:
        return True
    common: set[int] | None = None
    for pid in provider_ids:
        chain = set(tree.ancestors_or_self(pid))
        common = chain if common is None else common & chain
        if not common:
            return False
    return bool(common and common & set(provider_ids))


def search(
    trees: Iterable[TreeView | Candidate | KeptAnswer],
    request: CandidateRequest,
    *,
    limit: int | None,
    budget: SearchBudget,
    seen: set[CandidateKey],
    sharing_ids: frozenset[int] = frozenset(),
) -> list[Candidate]:
    """Candidates from these trees in order, skipping any already in ``seen``, up to ``limit``.

    A candidate among the trees stands for a tree whose only answer the caller already has: a lone
    host with no sharing provider anchored to it and not itself a sharing provider, under a plain
    request (``lone_host_candidate``).  It costs the step its search would have.  A ``KeptAnswer``
    stands for every answer of its tree, and costs a step for each, as deciding them did."""
    found: list[Candidate] = []
    plain = request.plain_resources
    candidates: Iterable[Candidate]
    for tree in trees:
        if type(tree) is Candidate:
            budget.remaining -= 1
            if budget.remaining < 0:
                break
            found.append(tree)
            if limit is not None and len(found) >= limit:
                return found
            continue
        if type(tree) is KeptAnswer:
            kept = tree.candidates
            # As ``_plain_candidates`` spends them: one step per answer, stopping where none is left.
            remaining = budget.remaining - len(kept)
            if remaining < 0:
                kept = kept[: max(budget.remaining, 0)]
                remaining = -1
            budget.remaining = remaining
            candidates, may_repeat = kept, tree.may_repeat
        else:
            assert isinstance(tree, TreeView)
            candidates = (
                _plain_candidates(tree.pool, plain, budget) if plain is not None else search_tree(tree, request, budget)
            )
            # Only an answer made of sharing providers alone can come again from another tree, and
            # only a tree with sharing providers in its pool can give one.
            may_repeat = False
            if sharing_ids:
                members = tree.members
                may_repeat = bool(tree.sharing) or (
                    members[0].id in sharing_ids if len(members) == 1 else any(p.id in sharing_ids for p in members)
                )
        for candidate in candidates:
            if may_repeat and not candidate.allocations.keys() - sharing_ids:
                key = candidate.key()
                if key in seen:
                    continue
                seen.add(key)
            found.append(candidate)
            if limit is not None and len(found) >= limit:
                return found
        if budget.remaining < 0:
            break
    return found
