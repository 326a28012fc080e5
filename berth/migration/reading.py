"""Reading the books of a running Placement through its API, and checking that they add up.

Every provider's answers carry its generation, and every consumer's answer the generations of the
providers it uses; the per-provider usages must equal the sum of the consumers' allocations. When
any of these disagree, something wrote while the books were read: the read is refused
(``SourceChanged``) rather than handing on books that were never true at any one moment.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from berth.clients.errors import PlacementError
from berth.clients.placement import PlacementClient
from berth.migration.books import Books, Consumer, Inventory, Progress, Provider, no_progress
from berth.migration.errors import NotPlacement, SourceChanged, TooOld, Unreadable

# The first microversion with consumer generations, which the books must keep.
OLDEST = (1, 28)
NEWEST = "1.39"
# How many times each read after the first is tried (transport errors and 503s).
_ATTEMPTS = 4
JSON = dict[str, Any]


def parse_version(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    return int(major), int(minor)


def read_placement(
    url: str,
    *,
    token: str | None = "admin",
    microversion: str = NEWEST,
    progress: Progress | None = None,
    timeout: float = 60.0,
) -> Books:
    """The books of the Placement at ``url``, read at ``microversion`` or the newest it speaks below.

    ``token`` goes in ``X-Auth-Token`` (None or empty: none is sent); the reads need
    the admin role. Raises ``TooOld`` below 1.28, ``SourceChanged`` when the books do not add up,
    ``Unreadable`` when the endpoint does not answer or refuses a read, and ``NotPlacement`` when it
    answers, but not as Placement does.
    """
    try:
        return _read(url, token, microversion, progress or no_progress, timeout)
    except PlacementError as error:
        # Which endpoint failed is what the caller must say, and a comparison reads two.
        raise Unreadable(url, error) from error
    except (LookupError, TypeError, ValueError) as error:
        # JSON without the fields Placement's answers have (``_get`` refuses what is not JSON).
        raise NotPlacement(_not_placement(url, f"an answer without what Placement's has ({error!r})")) from error


def _get(client: PlacementClient, path: str) -> Any:
    """The JSON object ``path`` answers; ``NotPlacement`` for an answer that is not one."""
    try:
        answer = client.get(path)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise NotPlacement(_not_placement(client.url, f"GET {path} did not answer with a JSON object"))
    return answer


def _not_placement(url: str, what: str) -> str:
    return (
        f"{url} does not answer as Placement does: {what}; give Placement's endpoint itself, whose GET "
        "answers with the API's versions"
    )


def _read(url: str, token: str | None, microversion: str, report: Progress, timeout: float) -> Books:
    # The first request is made once: an endpoint that does not answer it is a wrong URL or a service
    # that is down, to be said at once; the reads after it are retried, so that a blip does not end
    # a long read.
    client = PlacementClient(url, token or "", timeout=timeout, roles=(), attempts=1)
    version = negotiate(client, microversion)
    client.attempts = _ATTEMPTS
    client.headers["OpenStack-API-Version"] = f"placement {version}"
    books = Books(source=url, microversion=version)
    books.resource_classes = {entry["name"] for entry in _get(client, "/resource_classes")["resource_classes"]}
    books.traits = set(_get(client, "/traits")["traits"])
    report("names", 1, 1)

    listed: list[JSON] = _get(client, "/resource_providers")["resource_providers"]
    seen: dict[str, dict[str, dict[str, int]]] = {}
    for done, entry in enumerate(listed, 1):
        provider, seen[entry["uuid"]] = _read_provider(client, entry)
        books.providers[provider.uuid] = provider
        report("providers", done, len(listed))

    consumer_uuids = sorted({consumer for held in seen.values() for consumer in held})
    for done, uuid in enumerate(consumer_uuids, 1):
        books.consumers[uuid] = _read_consumer(client, uuid, books)
        report("consumers", done, len(consumer_uuids))

    projects = sorted({consumer.project_id for consumer in books.consumers.values()})
    for done, project in enumerate(projects, 1):
        books.project_usages[project] = _get(client, "/usages?" + urlencode({"project_id": project}))["usages"]
        report("project usages", done, len(projects))

    problems = cross_check(books, seen)
    if problems:
        raise SourceChanged(
            f"the books read from {url} do not add up, so something wrote to it while they were read; "
            "stop the services that write to it and read again: " + "; ".join(problems[:10])
        )
    return books


def negotiate(client: PlacementClient, wanted: str) -> str:
    """The lower of ``wanted`` and the newest microversion the service speaks, if at least 1.28."""
    versions = _get(client, "/")["versions"]
    newest = max((parse_version(v["max_version"]) for v in versions), default=(1, 0))
    chosen = min(parse_version(wanted), newest)
    if chosen < OLDEST:
        raise TooOld(
            f"{client.url} speaks microversions up to {newest[0]}.{newest[1]}, and moving needs 1.28 "
            "or later (consumer generations)"
        )
    return f"{chosen[0]}.{chosen[1]}"


def _read_provider(client: PlacementClient, entry: JSON) -> tuple[Provider, dict[str, dict[str, int]]]:
    """One provider, and its allocations as its own answer shows them (consumer -> class -> amount)."""
    uuid = entry["uuid"]
    provider = Provider(
        uuid=uuid,
        name=entry["name"],
        generation=int(entry["generation"]),
        parent_uuid=entry.get("parent_provider_uuid"),
        root_uuid=entry.get("root_provider_uuid") or uuid,
    )
    base = f"/resource_providers/{uuid}"
    try:
        answers = {
            part: _get(client, f"{base}/{part}") for part in ("inventories", "traits", "aggregates", "allocations")
        }
    except PlacementError as error:
        if error.status != 404:
            raise
        raise SourceChanged(f"provider {uuid} was deleted while it was read") from error
    for part, answer in answers.items():
        if answer.get("resource_provider_generation", provider.generation) != provider.generation:
            raise SourceChanged(f"provider {uuid} changed while it was read (its {part} show another generation)")
    provider.inventories = {
        resource_class: Inventory(
            total=int(record["total"]),
            reserved=int(record["reserved"]),
            min_unit=int(record["min_unit"]),
            max_unit=int(record["max_unit"]),
            step_size=int(record["step_size"]),
            allocation_ratio=float(record["allocation_ratio"]),
        )
        for resource_class, record in answers["inventories"]["inventories"].items()
    }
    provider.traits = set(answers["traits"]["traits"])
    provider.aggregates = set(answers["aggregates"]["aggregates"])
    provider.usages = {rc: int(n) for rc, n in _get(client, f"{base}/usages")["usages"].items() if n}
    held = {consumer: dict(e["resources"]) for consumer, e in answers["allocations"]["allocations"].items()}
    return provider, held


def _read_consumer(client: PlacementClient, uuid: str, books: Books) -> Consumer:
    try:
        answer = _get(client, f"/allocations/{uuid}")
    except PlacementError as error:
        raise SourceChanged(f"consumer {uuid} could not be read: {error}") from error
    if not answer.get("allocations"):
        raise SourceChanged(f"consumer {uuid} has no allocations any more")
    for provider_uuid, entry in answer["allocations"].items():
        provider = books.providers.get(provider_uuid)
        if provider is None or entry.get("generation", provider.generation) != provider.generation:
            raise SourceChanged(f"provider {provider_uuid} of consumer {uuid} changed while it was read")
    consumer_type = answer.get("consumer_type")
    return Consumer(
        uuid=uuid,
        generation=int(answer["consumer_generation"]),
        project_id=answer["project_id"],
        user_id=answer["user_id"],
        consumer_type=None if consumer_type in (None, "unknown") else consumer_type,
        allocations={rp: {rc: int(n) for rc, n in e["resources"].items()} for rp, e in answer["allocations"].items()},
    )


def cross_check(books: Books, seen: dict[str, dict[str, dict[str, int]]]) -> list[str]:
    """Where the consumers' allocations disagree with the providers' allocations or usages."""
    summed: dict[str, dict[str, int]] = {}
    for (provider_uuid, resource_class), amount in books.used().items():
        if amount:
            summed.setdefault(provider_uuid, {})[resource_class] = amount
    held: dict[str, dict[str, dict[str, int]]] = {}
    for consumer in books.consumers.values():
        for provider_uuid, classes in consumer.allocations.items():
            held.setdefault(provider_uuid, {})[consumer.uuid] = classes
    problems = []
    for uuid, provider in sorted(books.providers.items()):
        if summed.get(uuid, {}) != provider.usages:
            problems.append(f"provider {uuid}: usages {provider.usages}, allocations sum to {summed.get(uuid, {})}")
        if held.get(uuid, {}) != seen.get(uuid, {}):
            problems.append(f"provider {uuid}: its allocations and its consumers' disagree")
    return problems
