"""A cloud's layout built through the API: providers with their inventories, traits, aggregates and
nested children; and removed again from a server that is not thrown away."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from berth.testbed.client import Client
from berth.testbed.parallel import Stop, parallel

# POST /resource_providers returns the provider (with its generation) from 1.20 on.
CREATE_VERSION = "1.20"


Inventory = dict[str, dict[str, Any]]  # resource class -> total, reserved, allocation_ratio, ...


@dataclass
class ProviderSpec:
    """One provider to create, and its children (created right after it, depth first)."""

    name: str
    inventory: Inventory = field(default_factory=dict)
    traits: list[str] = field(default_factory=list)
    aggregates: list[str] = field(default_factory=list)
    children: list[ProviderSpec] = field(default_factory=list)


def create_custom_traits(client: Client, traits: Iterable[str]) -> None:
    """Create the CUSTOM_ traits among ``traits`` (standard ones exist already)."""
    for trait in traits:
        if trait.startswith("CUSTOM_"):
            client.call("PUT", f"/traits/{trait}", expect=(201, 204))


def create_provider(client: Client, spec: ProviderSpec, parent: str | None = None) -> str:
    """Create one provider (not its children) and set what ``spec`` gives it; its uuid.

    Each write names the generation the previous one returned, as a real client would.
    """
    body: dict[str, Any] = {"name": spec.name}
    if parent:
        body["parent_provider_uuid"] = parent
    created = client.call("POST", "/resource_providers", body, version=CREATE_VERSION)
    uuid: str = created["uuid"]
    generation = created["generation"]
    for what, value in (("inventories", spec.inventory), ("traits", spec.traits), ("aggregates", spec.aggregates)):
        if value:
            generation = client.call(
                "PUT",
                f"/resource_providers/{uuid}/{what}",
                {"resource_provider_generation": generation, what: value},
            )["resource_provider_generation"]
    return uuid


def create_tree(client: Client, spec: ProviderSpec, parent: str | None = None) -> list[str]:
    """Create the provider and its descendants; their uuids, depth first (the root first)."""
    uuid = create_provider(client, spec, parent)
    made = [uuid]
    for child in spec.children:
        made += create_tree(client, child, uuid)
    return made


def remove_layout(
    client: Client,
    consumers: list[str],
    providers_by_depth: list[list[str]],
    threads: int,
    stop: Stop,
    log: Callable[[str], None] | None = None,
) -> None:
    """Delete consumers' allocations, then providers, deepest first (a parent with children cannot go)."""

    def delete(path: str) -> None:
        client.call("DELETE", path, expect=(204, 404))

    def progress(what: str, total: int) -> Callable[[int], None] | None:
        return None if log is None else (lambda done: log(f"  {what}: {done}/{total}"))

    paths = [f"/allocations/{c}" for c in consumers]
    parallel(paths, threads, delete, stop, client=client, progress=progress("consumers removed", len(paths)))
    for level in providers_by_depth:
        paths = [f"/resource_providers/{rp}" for rp in level]
        parallel(paths, threads, delete, stop, client=client, progress=progress("providers removed", len(paths)))
