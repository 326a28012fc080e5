"""``berth inventory show|set``: a provider's inventory, one class at a time for writes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click
from rich.console import RenderableType

from berth.cli.client.connection import Api, placement_command, segment
from berth.cli.client.output import capacity, emit, table
from berth.cli.client.providers import find_provider
from berth.clients.placement import retry_on_conflict

COLUMNS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")


@click.group("inventory", help="A provider's inventory: show it, set one class of it.")
def inventory_group() -> None:
    pass


def _render(title: str, inventories: dict[str, Any]) -> Iterable[RenderableType]:
    rows = [(rc, *(inv[column] for column in COLUMNS), capacity(inv)) for rc, inv in sorted(inventories.items())]
    yield table(title, ("class", *COLUMNS, "capacity"), rows, numeric=len(COLUMNS) + 1)


@inventory_group.command("show", help="Show a provider's inventory (by name or uuid).")
@click.argument("provider")
@placement_command
def inventory_show(api: Api, provider: str) -> None:
    found = find_provider(api, provider)
    body = api.get(f"/resource_providers/{segment(found['uuid'])}/inventories")
    emit(api.output, body, lambda: _render(f"inventory of {found['name']}", body["inventories"]))


@inventory_group.command(
    "set",
    help="Set one class of a provider's inventory, keeping the others; options not given keep their value.",
)
@click.argument("provider")
@click.argument("resource_class")
@click.option("--total", type=click.IntRange(min=1), default=None, help="units in all (needed for a new class)")
@click.option("--reserved", type=click.IntRange(min=0), default=None, help="units kept back")
@click.option("--min-unit", type=click.IntRange(min=1), default=None, help="least units in one allocation")
@click.option("--max-unit", type=click.IntRange(min=1), default=None, help="most units in one allocation")
@click.option("--step-size", type=click.IntRange(min=1), default=None, help="allocations are multiples of this")
@click.option("--allocation-ratio", type=click.FloatRange(min=0, min_open=True), default=None, help="overcommit")
@placement_command
def inventory_set(api: Api, provider: str, resource_class: str, **changes: Any) -> None:
    found = find_provider(api, provider)
    uuid = found["uuid"]
    given = {key: value for key, value in changes.items() if value is not None}
    if not given:
        raise click.UsageError("nothing to set: give at least one of --total, --reserved, --min-unit, ...")
    api.client.ensure_resource_class(resource_class)

    def write() -> None:
        # Re-read on every attempt: a conflict means someone else changed the inventory meanwhile.
        generation, inventories = api.client.get_inventories(uuid)
        record = dict(inventories.get(resource_class, {}))
        if not record and "total" not in given:
            raise click.UsageError(f"{found['name']} has no {resource_class} inventory yet: give its --total")
        record.update(given)
        inventories[resource_class] = record
        api.client.set_inventories(uuid, generation, inventories)

    retry_on_conflict(write, what=f"set {resource_class} inventory of {found['name']}")
    body = api.get(f"/resource_providers/{segment(uuid)}/inventories")
    emit(api.output, body, lambda: _render(f"inventory of {found['name']}", body["inventories"]))
