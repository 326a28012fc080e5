"""Every difference between the books of two Placement endpoints, read through their APIs.

A difference names its kind, where it is (which class, trait, provider or consumer) and what each
side holds. Generations differ whenever one side has seen writes the other has not, even when the
books are otherwise equal, so they are a kind of their own marked ``informational``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from berth.migration.books import Books, Consumer, Progress, Provider
from berth.migration.errors import Unreadable
from berth.migration.reading import NEWEST, parse_version, read_placement

_ABSENT = "(absent)"


@dataclass(frozen=True)
class Auth:
    """How to authenticate to one endpoint: ``token`` in ``X-Auth-Token`` (None: none sent)."""

    token: str | None = "admin"


@dataclass(frozen=True)
class Difference:
    kind: str
    where: str
    first: object
    second: object
    informational: bool = False

    def __str__(self) -> str:
        note = " (informational)" if self.informational else ""
        return f"{self.kind} of {self.where}{note}: {self.first!r} on the first side, {self.second!r} on the second"


def compare(
    first_url: str,
    second_url: str,
    *,
    auth: Auth | None = None,
    second_auth: Auth | None = None,
    microversion: str = NEWEST,
    progress: Progress | None = None,
) -> list[Difference]:
    """Every difference between the two endpoints' books, read at the newest microversion both speak
    (at most ``microversion``); empty when they hold the same books."""
    auth = auth or Auth()
    second_auth = second_auth or auth

    def read(side: str, url: str, how: Auth, version: str) -> Books:
        try:
            return read_placement(url, token=how.token, microversion=version, progress=progress)
        except Unreadable as error:
            raise Unreadable(url, error.error, side) from error.__cause__

    first = read("first", first_url, auth, microversion)
    second = read("second", second_url, second_auth, first.microversion)
    if parse_version(second.microversion) < parse_version(first.microversion):
        first = read("first", first_url, auth, second.microversion)
    return differences(first, second)


def differences(first: Books, second: Books) -> list[Difference]:
    """Every difference between two sets of books, names first, then providers, then consumers."""
    found: list[Difference] = []
    found += _set_difference("resource class", first.resource_classes, second.resource_classes)
    found += _set_difference("trait", first.traits, second.traits)
    for uuid in sorted(first.providers.keys() | second.providers.keys()):
        found += _provider_differences(uuid, first.providers.get(uuid), second.providers.get(uuid))
    for uuid in sorted(first.consumers.keys() | second.consumers.keys()):
        found += _consumer_differences(uuid, first.consumers.get(uuid), second.consumers.get(uuid))
    for project in sorted(first.project_usages.keys() | second.project_usages.keys()):
        one, other = first.project_usages.get(project), second.project_usages.get(project)
        if one != other:
            found.append(Difference("usages", f"project {project}", one, other))
    return found


def _set_difference(kind: str, first: set[str], second: set[str]) -> Iterable[Difference]:
    for name in sorted(first ^ second):
        yield Difference(kind, name, "present" if name in first else _ABSENT, "present" if name in second else _ABSENT)


def _provider_differences(uuid: str, first: Provider | None, second: Provider | None) -> list[Difference]:
    if first is None or second is None:
        return [Difference("provider", f"provider {uuid}", _summary(first), _summary(second))]
    where = f"provider {uuid} ({first.name})"
    found = []
    if first.name != second.name:
        found.append(Difference("name", where, first.name, second.name))
    tree = (first.parent_uuid, first.root_uuid), (second.parent_uuid, second.root_uuid)
    if tree[0] != tree[1]:
        found.append(Difference("tree (parent, root)", where, *tree))
    for resource_class in sorted(first.inventories.keys() | second.inventories.keys()):
        one, other = first.inventories.get(resource_class), second.inventories.get(resource_class)
        if one != other:
            found.append(
                Difference(
                    "inventory",
                    f"{where} class {resource_class}",
                    asdict(one) if one else _ABSENT,
                    asdict(other) if other else _ABSENT,
                )
            )
    for kind, one_set, other_set in (
        ("traits", first.traits, second.traits),
        ("aggregates", first.aggregates, second.aggregates),
    ):
        if one_set != other_set:
            found.append(Difference(kind, where, sorted(one_set), sorted(other_set)))
    if first.usages != second.usages:
        found.append(Difference("usages", where, first.usages, second.usages))
    if first.generation != second.generation:
        found.append(Difference("generation", where, first.generation, second.generation, informational=True))
    return found


def _summary(provider: Provider | None) -> object:
    return _ABSENT if provider is None else {"name": provider.name, "parent": provider.parent_uuid}


def _consumer_differences(uuid: str, first: Consumer | None, second: Consumer | None) -> list[Difference]:
    where = f"consumer {uuid}"
    if first is None or second is None:
        return [Difference("consumer", where, _allocations_of(first), _allocations_of(second))]
    found = []
    for kind, one, other in (
        ("project", first.project_id, second.project_id),
        ("user", first.user_id, second.user_id),
        ("consumer type", first.consumer_type, second.consumer_type),
    ):
        if one != other:
            found.append(Difference(kind, where, one, other))
    for provider in sorted(first.allocations.keys() | second.allocations.keys()):
        one_held, other_held = first.allocations.get(provider), second.allocations.get(provider)
        if one_held != other_held:
            found.append(
                Difference("allocations", f"{where} on provider {provider}", one_held or _ABSENT, other_held or _ABSENT)
            )
    if first.generation != second.generation:
        found.append(Difference("generation", where, first.generation, second.generation, informational=True))
    return found


def _allocations_of(consumer: Consumer | None) -> object:
    return _ABSENT if consumer is None else consumer.allocations
