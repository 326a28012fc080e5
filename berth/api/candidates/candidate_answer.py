"""The body of an allocation candidates answer: allocation requests and provider summaries.

Most of an answer repeats from one request to the next: the allocation request that puts all of a
request on one provider, and (from 1.27, when a summary no longer depends on what was asked) each
provider's summary.  Both are kept with the provider's copy in the process's ``ProviderCache`` and
made again only when that copy is replaced, that is when the provider changed.  They are kept as
the JSON orjson wrote for them (``orjson.Fragment``), which the answer's own ``orjson.dumps`` copies
as it is: an answer of a thousand candidates is then mostly copied bytes, not objects written again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias, cast

import orjson

from berth.api import microversion as mv
from berth.api.microversion import Version
from berth.domain.candidates import Candidate, ProviderData
from berth.store.candidates.kept_walk import Run, Stretch
from berth.store.candidates.names import AnswerNames
from berth.store.candidates.provider_cache import ProviderCache

# JSON objects of the answer, as orjson writes them.
JsonObject: TypeAlias = dict[str, Any]
# A piece of the answer: an object, or the JSON of one written before (kept with a provider's copy).
Piece: TypeAlias = JsonObject | orjson.Fragment


# The pieces of a kept answer (``Candidate.kept``): its allocation request, the summaries of its own
# tree's providers it shows (by id: uuid and summary), and the providers of other trees it names
# (sharing providers), whose summaries are made as any other's; False where they depend on names
# that may change.
KeptAnswerPieces: TypeAlias = tuple[orjson.Fragment, dict[int, tuple[str, orjson.Fragment]], tuple[int, ...]]
# The allocation requests of some candidates, the providers they name whose summaries are made for
# this answer, and the (uuid, summary) of those kept with the answers.
_Requests: TypeAlias = tuple[list[Piece], set[int], dict[int, tuple[str, orjson.Fragment]]]


def kept_shape(version: Version) -> str | None:
    """What the pieces of a tree's kept answer depend on besides its providers' copies and the
    amounts: the key under which ``CandidateFinder`` keeps such answers (``kept_shape``).  None before
    1.27, where a summary shows only the classes asked for."""
    if version < mv.SUMMARY_ALL_CLASSES:
        return None
    flags = (
        version >= mv.ALLOCATIONS_BY_PROVIDER,
        version >= mv.CANDIDATE_MAPPINGS,
        version >= mv.CANDIDATE_TRAITS,
        version >= mv.NESTED_CANDIDATES,
    )
    return "answer " + "".join(str(int(flag)) for flag in flags)


def render(
    version: Version,
    candidates: Sequence[Candidate],
    providers: Mapping[int, ProviderData],
    requested_classes: set[int],
    names: AnswerNames,
    cache: ProviderCache,
    runs: Sequence[Run] | None = None,
) -> JsonObject:
    """The answer's body; with ``runs`` (``CandidateFinder.runs``), the pieces of a whole stretch's
    answers are made once and kept with the stretch (``Stretch.made``)."""
    answer = _Answer(version, providers, names, cache)
    requests, in_answers, kept_summaries = answer.allocation_requests(candidates, runs)
    summaries = answer.provider_summaries(in_answers, requested_classes, kept_summaries)
    return {"allocation_requests": requests, "provider_summaries": summaries}


class _Answer:
    """What the microversion asks an answer to show, and the pieces it shares while being made."""

    def __init__(
        self, version: Version, providers: Mapping[int, ProviderData], names: AnswerNames, cache: ProviderCache
    ):
        self.providers = providers
        self.names = names
        self.cache = cache
        self.dict_format = version >= mv.ALLOCATIONS_BY_PROVIDER
        self.with_mappings = version >= mv.CANDIDATE_MAPPINGS
        self.all_classes = version >= mv.SUMMARY_ALL_CLASSES
        self.with_traits = version >= mv.CANDIDATE_TRAITS
        self.with_tree = version >= mv.NESTED_CANDIDATES
        # Standard names never change and trait names cannot, but a custom class can be renamed
        # (before 1.7): pieces kept with a provider from one request to the next are kept per set of
        # these names.  Strings, whose hashes Python keeps.
        custom_names = tuple(sorted((rc, name) for rc, name in names.class_names.items() if name.startswith("CUSTOM_")))
        self.request_shape = f"requests {self.dict_format:d}{self.with_mappings:d} {custom_names}"
        self.summary_shape = f"summary {self.with_traits:d}{self.with_tree:d} {custom_names}"
        # Most answers place the same amounts: each distinct set is named once and its dict shared.
        self._named_resources: dict[tuple[tuple[int, int], ...], dict[str, int]] = {}
        # Many providers carry the same set of traits: each set is named and ordered once.
        self._named_traits: dict[frozenset[int], list[str]] = {}

    # --- allocation requests -------------------------------------------------------------------

    def allocation_requests(self, candidates: Sequence[Candidate], runs: Sequence[Run] | None = None) -> _Requests:
        """The allocation request of each candidate, the providers they name but those whose
        summaries were kept with the answers, and the uuid and summary of each of those; run by run
        when the candidates came in ``runs``, a whole stretch's pieces taken as kept with it."""
        if runs is None:
            return self._requests_of(candidates)
        requests: list[Piece] = []
        in_answers: set[int] = set()
        kept_summaries: dict[int, tuple[str, orjson.Fragment]] = {}
        position = 0
        for stretch, count in runs:
            whole = stretch is not None and stretch.answers is not None and count == len(stretch.answers)
            made = self._stretch_pieces(stretch) if whole and stretch is not None else None
            if made is None:
                made = self._requests_of(candidates[position : position + count])
            position += count
            requests += made[0]
            in_answers |= made[1]
            kept_summaries.update(made[2])
        return requests, in_answers, kept_summaries

    def _stretch_pieces(self, stretch: Stretch) -> _Requests | None:
        """The pieces of every answer of a stretch, made once and kept with it, when each answer's
        own pieces are kept with it (else they depend on names that may change)."""
        if stretch.made:
            return cast(_Requests | None, stretch.made[0])
        answers = stretch.answers or ()
        made = self._requests_of(answers)
        kept = all(candidate.kept is not None and candidate.kept.value for candidate in answers)
        stretch.made.append(made if kept else None)
        return made

    def _requests_of(self, candidates: Sequence[Candidate]) -> _Requests:
        requests: list[Piece] = []
        in_answers: set[int] = set()
        kept_summaries: dict[int, tuple[str, orjson.Fragment]] = {}
        providers, memo, request_shape = self.providers, self.cache.memo, self.request_shape
        for candidate in candidates:
            kept = candidate.kept
            if kept is not None:
                # An answer kept with its tree's root's copy: its pieces made once, then read as they are.
                pieces = kept.value
                if pieces is None:
                    pieces = kept.value = self._kept_pieces(candidate, kept.tree)
                if pieces:
                    request_json, summaries, others = cast(KeptAnswerPieces, pieces)
                    requests.append(request_json)
                    kept_summaries.update(summaries)
                    if others:
                        in_answers.update(others)
                    continue
            allocations = candidate.allocations
            mappings = candidate.mappings
            if len(allocations) == 1 and len(mappings) == 1:
                [(pid, by_rc)] = allocations.items()
                [(suffix, ids)] = mappings.items()
                if len(ids) == 1 and ids[0] == pid:
                    # The commonest answer, everything on one provider: the same entry serves every
                    # request that places the same amounts there, as long as the copy is current.
                    in_answers.add(pid)
                    key = (request_shape, suffix, *by_rc.items())
                    requests.append(memo(providers[pid], key, self._allocation_request_json, candidate))
                    continue
            in_answers.update(allocations)
            for ids in mappings.values():
                in_answers.update(ids)
            requests.append(self._allocation_request(candidate))
        return requests, in_answers, kept_summaries

    def _kept_pieces(self, candidate: Candidate, tree: tuple[int, ...]) -> KeptAnswerPieces | bool:
        """The pieces of a kept answer of the tree of these providers, for as long as the answer is
        kept; False if a class it shows is a custom one, whose name may change (before 1.7) without
        any copy changing."""
        providers = self.providers
        class_names = self.names.class_names
        named = set(candidate.allocations)
        for ids in candidate.mappings.values():
            named.update(ids)
        # From 1.29 the summaries of every provider of the tree if the answer names one (not if it
        # is made of sharing providers of other trees alone), else of those it names.
        own = [pid for pid in tree if pid in named]
        if self.with_tree and own:
            own = list(tree)
        if not self.all_classes or any(
            class_names[rc].startswith("CUSTOM_")
            for rc in {rc for pid in own for rc in providers[pid].inventories}.union(
                *(by_rc for by_rc in candidate.allocations.values())
            )
        ):
            return False
        memo = self.cache.memo
        allocations = candidate.allocations
        if len(allocations) == 1 and len(candidate.mappings) == 1:
            # The same piece as the provider's other answers use, kept with its copy.
            [(pid, by_rc)] = allocations.items()
            [suffix] = candidate.mappings
            request_json = memo(
                providers[pid], (self.request_shape, suffix, *by_rc.items()), self._allocation_request_json, candidate
            )
        else:
            request_json = self._allocation_request_json(candidate)
        summaries = {
            pid: (
                providers[pid].uuid,
                memo(providers[pid], self.summary_shape, self._summary_json, providers[pid], set()),
            )
            for pid in own
        }
        return request_json, summaries, tuple(named.difference(tree))

    def _allocation_request_json(self, candidate: Candidate) -> orjson.Fragment:
        """A piece kept from one request to the next: its JSON, written once."""
        return orjson.Fragment(orjson.dumps(self._allocation_request(candidate)))

    def _allocation_request(self, candidate: Candidate) -> JsonObject:
        uuid_of = self.names.provider_uuids
        allocations = candidate.allocations
        entry: JsonObject
        if self.dict_format:
            entry = {
                "allocations": {
                    uuid_of[pid]: {"resources": self._resources(by_rc)} for pid, by_rc in allocations.items()
                }
            }
        else:
            entry = {
                "allocations": [
                    {"resource_provider": {"uuid": uuid_of[pid]}, "resources": self._resources(by_rc)}
                    for pid, by_rc in allocations.items()
                ]
            }
        if self.with_mappings:
            entry["mappings"] = {suffix: [uuid_of[pid] for pid in ids] for suffix, ids in candidate.mappings.items()}
        return entry

    def _resources(self, by_rc: Mapping[int, int]) -> dict[str, int]:
        key = tuple(by_rc.items())
        named = self._named_resources.get(key)
        if named is None:
            class_names = self.names.class_names
            named = self._named_resources[key] = {class_names[rc]: amount for rc, amount in key}
        return named

    # --- provider summaries --------------------------------------------------------------------

    def provider_summaries(
        self,
        in_answers: set[int],
        requested_classes: set[int],
        kept_summaries: Mapping[int, tuple[str, orjson.Fragment]],
    ) -> dict[str, Piece]:
        """A summary of each provider in the answers (from 1.29, of every provider of their trees),
        in id order; those kept with the answers as they are."""
        providers = self.providers
        if self.with_tree and in_answers:
            roots = {providers[pid].root_id for pid in in_answers}
            summary_ids = {pid for pid, p in providers.items() if p.root_id in roots} | in_answers
        else:
            summary_ids = in_answers
        summaries: dict[str, Piece] = {}
        memo, summary_shape = self.cache.memo, self.summary_shape
        for pid in sorted(summary_ids.union(kept_summaries)):
            kept = kept_summaries.get(pid)
            if kept is not None:
                summaries[kept[0]] = kept[1]
                continue
            provider = providers[pid]
            if self.all_classes:
                # A summary then depends on the provider alone: made once per copy of it.
                summaries[provider.uuid] = memo(
                    provider, summary_shape, self._summary_json, provider, requested_classes
                )
            else:
                summaries[provider.uuid] = self._summary(provider, requested_classes)
        return summaries

    def _summary_json(self, provider: ProviderData, requested_classes: set[int]) -> orjson.Fragment:
        return orjson.Fragment(orjson.dumps(self._summary(provider, requested_classes)))

    def _summary(self, provider: ProviderData, requested_classes: set[int]) -> JsonObject:
        class_names = self.names.class_names
        resources = {}
        for rc, inv in provider.inventories.items():
            if self.all_classes or rc in requested_classes:
                resources[class_names[rc]] = {"capacity": inv.capacity, "used": inv.used}
        summary: JsonObject = {"resources": resources}
        if self.with_traits:
            summary["traits"] = self._trait_names(provider.traits)
        if self.with_tree:
            uuid_of = self.names.provider_uuids
            summary["parent_provider_uuid"] = (
                uuid_of.get(provider.parent_id) if provider.parent_id is not None else None
            )
            summary["root_provider_uuid"] = uuid_of[provider.root_id]
        return summary

    def _trait_names(self, traits: frozenset[int]) -> list[str]:
        """In the order the traits were created, as the reference lists them."""
        named = self._named_traits.get(traits)
        if named is None:
            trait_names = self.names.trait_names
            named = self._named_traits[traits] = [trait_names[t] for t in sorted(traits)]
        return named
