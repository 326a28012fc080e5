"""``berth provider list|show|tree``, and finding a provider by name or uuid for every command."""

from __future__ import annotations

import uuid as uuid_module
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlencode

import click
from rich.console import RenderableType
from rich.markup import escape
from rich.tree import Tree

from berth.cli.client.connection import Api, ApiFailure, placement_command, segment
from berth.cli.client.output import capacity, emit, fields, table
from berth.clients.errors import PlacementError


def is_uuid(value: str) -> bool:
    try:
        uuid_module.UUID(value)
    except ValueError:
        return False
    return True


def find_provider(api: Api, reference: str) -> dict[str, Any]:
    """The provider with this uuid, or else with this name; an error naming what to do when none."""
    if is_uuid(reference):
        try:
            return dict(api.get(f"/resource_providers/{segment(reference)}"))
        except PlacementError as error:
            if error.status != 404:
                raise
    # Only the provider of exactly this name: the API takes an empty name for no filter at all, and
    # its first provider must not stand for a name typed empty (`inventory set "$HOST" ...`).
    listed = api.get("/resource_providers?" + urlencode({"name": reference}))["resource_providers"] if reference else []
    found = [provider for provider in listed if provider["name"] == reference]
    if not found:
        raise ApiFailure(
            f"no resource provider named or with uuid {reference!r}\nhint: `berth provider list` shows the providers"
        )
    return dict(found[0])


@click.group("provider", help="Resource providers: list, show one, draw a tree.")
def provider_group() -> None:
    pass


@provider_group.command("list", help="List the resource providers, optionally filtered.")
@click.option("--name", default=None, help="only the provider of this name")
@click.option("--in-tree", default=None, metavar="UUID", help="only the providers of the tree holding this one")
@click.option("--member-of", multiple=True, metavar="AGG[,AGG]", help="in one of these aggregates; repeatable")
@click.option("--required", multiple=True, metavar="TRAIT[,TRAIT]", help="with these traits; repeatable")
@click.option("--resources", default=None, metavar="RC:N[,RC:N]", help="with room for these resources")
@placement_command
def provider_list(
    api: Api,
    name: str | None,
    in_tree: str | None,
    member_of: tuple[str, ...],
    required: tuple[str, ...],
    resources: str | None,
) -> None:
    query: list[tuple[str, str]] = [(key, value) for key, value in (("name", name), ("in_tree", in_tree)) if value]
    query += [("member_of", value) for value in member_of] + [("required", value) for value in required]
    if resources:
        query.append(("resources", resources))
    body = api.get("/resource_providers" + ("?" + urlencode(query) if query else ""))
    providers = body["resource_providers"]

    def render() -> Iterable[RenderableType]:
        rows = [(p["uuid"], p["name"], p["generation"], p.get("parent_provider_uuid")) for p in providers]
        yield table(f"{len(rows)} resource providers", ("uuid", "name", "generation", "parent"), rows)

    emit(api.output, body, render)


@provider_group.command("show", help="Show one provider (by name or uuid) with its inventory and traits.")
@click.argument("provider")
@placement_command
def provider_show(api: Api, provider: str) -> None:
    body = find_provider(api, provider)

    def render() -> Iterable[RenderableType]:
        path = f"/resource_providers/{segment(body['uuid'])}"
        yield fields(
            f"resource provider {body['name']}",
            {key: value for key, value in body.items() if key != "links"},
        )
        inventories = api.get(path + "/inventories")["inventories"]
        usages = api.get(path + "/usages")["usages"]
        rows = [
            (rc, capacity(inv), usages.get(rc, 0), inv["total"], inv["reserved"]) for rc, inv in inventories.items()
        ]
        yield table("inventory", ("class", "capacity", "used", "total", "reserved"), rows, numeric=4)
        traits = api.get(path + "/traits")["traits"]
        yield fields(
            "traits and aggregates",
            {
                "traits": ", ".join(sorted(traits)) or None,
                "aggregates": ", ".join(sorted(api.get(path + "/aggregates")["aggregates"])) or None,
            },
        )

    emit(api.output, body, render)


@provider_group.command("tree", help="Draw the tree of providers that holds this one (by name or uuid).")
@click.argument("provider")
@placement_command
def provider_tree(api: Api, provider: str) -> None:
    found = find_provider(api, provider)
    body = api.get("/resource_providers?" + urlencode({"in_tree": found["uuid"]}))
    providers = body["resource_providers"]

    def render() -> Iterable[RenderableType]:
        children: dict[str | None, list[dict[str, Any]]] = {}
        for item in sorted(providers, key=lambda p: str(p["name"])):
            children.setdefault(item.get("parent_provider_uuid"), []).append(item)
        root = next(p for p in providers if p["uuid"] == found["root_provider_uuid"])
        tree = Tree(_label(api, root))
        pending = [(tree, root)]
        while pending:
            branch, node = pending.pop()
            for child in children.get(node["uuid"], []):
                pending.append((branch.add(_label(api, child)), child))
        yield tree

    emit(api.output, body, render)


def _label(api: Api, provider: dict[str, Any]) -> str:
    path = f"/resource_providers/{segment(provider['uuid'])}"
    inventories = api.get(path + "/inventories")["inventories"]
    usages = api.get(path + "/usages")["usages"] if inventories else {}
    held = "  ".join(f"{rc} {usages.get(rc, 0)}/{capacity(inv)}" for rc, inv in sorted(inventories.items()))
    return f"[bold]{escape(provider['name'])}[/bold] {provider['uuid']}" + (f"  {held}" if held else "")
