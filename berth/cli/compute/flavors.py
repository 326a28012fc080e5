"""``berth flavor create|list|show|delete|set|unset``: the conductors' flavors and their properties
(Nova's extra specs)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click
from rich.console import RenderableType

from berth.cli.client.connection import segment
from berth.cli.client.output import emit, fields, table
from berth.cli.compute.connection import Api, conductor_command, not_empty
from berth.cli.compute.servers import key_values

SIZE = click.IntRange(0, 2**31 - 1)


def find_flavor(api: Api, reference: str) -> dict[str, Any]:
    """The flavor with this id or name (the API looks up either)."""
    return dict(api.get(f"/flavors/{segment(reference)}")["flavor"])


def _properties(flavor: dict[str, Any]) -> str | None:
    return ", ".join(f"{k}={v}" for k, v in sorted(flavor["extra_specs"].items())) or None


def _show(api: Api, flavor: dict[str, Any]) -> None:
    def render() -> Iterable[RenderableType]:
        yield fields(
            f"flavor {flavor['name']}",
            {
                "id": flavor["id"],
                "name": flavor["name"],
                "vcpus": flavor["vcpus"],
                "ram (MB)": flavor["ram"],
                "disk (GB)": flavor["disk"],
                "ephemeral (GB)": flavor["OS-FLV-EXT-DATA:ephemeral"],
                "swap (MB)": flavor["swap"],
                "properties": _properties(flavor),
            },
        )

    emit(api.output, {"flavor": flavor}, render)


@click.group("flavor", help="Flavors: the sizes servers are built and resized to.")
def flavor_group() -> None:
    pass


@flavor_group.command("create", help="Create the flavor NAME.")
@click.argument("name")
@click.option("--vcpus", type=click.IntRange(1, 2**31 - 1), required=True, help="virtual CPUs")
@click.option("--ram", type=click.IntRange(1, 2**31 - 1), required=True, metavar="MB", help="memory in MB")
@click.option("--disk", type=SIZE, default=0, show_default=True, metavar="GB", help="root disk in GB")
@click.option("--ephemeral", type=SIZE, default=0, show_default=True, metavar="GB", help="ephemeral disk in GB")
@click.option("--swap", type=SIZE, default=0, show_default=True, metavar="MB", help="swap in MB")
@click.option("--id", "flavor_id", default=None, help="the flavor's id (default: one is made)")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE", help="an extra spec; repeatable")
@conductor_command
def flavor_create(
    api: Api,
    name: str,
    vcpus: int,
    ram: int,
    disk: int,
    ephemeral: int,
    swap: int,
    flavor_id: str | None,
    properties: tuple[str, ...],
) -> None:
    asked: dict[str, Any] = {"name": name, "vcpus": vcpus, "ram": ram, "disk": disk, "ephemeral": ephemeral}
    asked["swap"] = swap
    if flavor_id:
        asked["id"] = flavor_id
    if properties:
        asked["extra_specs"] = key_values(properties, "--property")
    _show(api, api.request("POST", "/flavors", {"flavor": asked})["flavor"])


@flavor_group.command("list", help="List the flavors.")
@conductor_command
def flavor_list(api: Api) -> None:
    body = api.get("/flavors")
    flavors = body["flavors"]

    def render() -> Iterable[RenderableType]:
        rows = [
            (
                f["id"],
                f["name"],
                f["vcpus"],
                f["ram"],
                f["disk"],
                f["OS-FLV-EXT-DATA:ephemeral"],
                f["swap"],
                _properties(f),
            )
            for f in flavors
        ]
        columns = ("id", "name", "vcpus", "ram (MB)", "disk (GB)", "ephemeral (GB)", "swap (MB)", "properties")
        yield table(f"{len(rows)} flavors", columns, rows)

    emit(api.output, body, render)


@flavor_group.command("show", help="Show a flavor, by name or id.")
@click.argument("flavor", callback=not_empty)
@conductor_command
def flavor_show(api: Api, flavor: str) -> None:
    _show(api, find_flavor(api, flavor))


@flavor_group.command("delete", help="Delete a flavor, by name or id (servers of it keep their size).")
@click.argument("flavor", callback=not_empty)
@conductor_command
def flavor_delete(api: Api, flavor: str) -> None:
    found = find_flavor(api, flavor)
    api.request("DELETE", f"/flavors/{segment(found['id'])}")
    if api.for_scripts:
        emit(api.output, {"deleted": found["id"]}, list)
    else:
        click.echo(f"flavor {found['name']} ({found['id']}) deleted")


@flavor_group.command("set", help="Set properties (extra specs) of a flavor.")
@click.argument("flavor", callback=not_empty)
@click.option("--property", "properties", multiple=True, required=True, metavar="KEY=VALUE", help="repeatable")
@conductor_command
def flavor_set(api: Api, flavor: str, properties: tuple[str, ...]) -> None:
    found = find_flavor(api, flavor)
    specs = key_values(properties, "--property")
    api.request("POST", f"/flavors/{segment(found['id'])}/os-extra_specs", {"extra_specs": specs})
    _show(api, find_flavor(api, found["id"]))


@flavor_group.command("unset", help="Remove properties (extra specs) of a flavor.")
@click.argument("flavor", callback=not_empty)
@click.option("--property", "keys", multiple=True, required=True, metavar="KEY", help="repeatable")
@conductor_command
def flavor_unset(api: Api, flavor: str, keys: tuple[str, ...]) -> None:
    found = find_flavor(api, flavor)
    for key in keys:
        api.request("DELETE", f"/flavors/{segment(found['id'])}/os-extra_specs/{segment(key)}")
    _show(api, find_flavor(api, found["id"]))
