"""``berth inventory show|set``: a provider's inventory, one class at a time for writes."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import click
from rich.console import RenderableType

from berth.cli.client.connection import Api, ApiFailure, placement_command, segment
from berth.cli.client.output import capacity, emit, table
from berth.cli.client.providers import find_provider
from berth.clients.errors import PlacementError
from berth.clients.placement import retry_on_conflict
from berth.domain.capacity import Inventory

# The largest amount the API takes in an inventory field (a signed 32-bit integer, as in Placement).
MAX_UNITS = 2147483647
UNITS = click.IntRange(min=1, max=MAX_UNITS)
UNITS_OR_NONE = click.IntRange(min=0, max=MAX_UNITS)
COLUMNS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")


def _finite(_context: click.Context, parameter: click.Parameter, value: float | None) -> float | None:
    """Refuse "nan" and "inf" (and 1e400, read as inf), which a range lets through: no capacity is made
    of them (the service refuses a finite ratio above its largest itself)."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"give a number above 0, e.g. 1.5, not {value}", param=parameter)
    return value


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
@click.option("--total", type=UNITS, default=None, help="units in all (needed for a new class)")
@click.option("--reserved", type=UNITS_OR_NONE, default=None, help="units kept back")
@click.option("--min-unit", type=UNITS, default=None, help="least units in one allocation")
@click.option("--max-unit", type=UNITS, default=None, help="most units in one allocation")
@click.option("--step-size", type=UNITS, default=None, help="allocations are multiples of this")
@click.option(
    "--allocation-ratio", type=click.FloatRange(min=0, min_open=True), callback=_finite, default=None, help="overcommit"
)
@click.option(
    "--create-class",
    is_flag=True,
    default=False,
    help="create the custom resource class (CUSTOM_...) if the service does not know it yet",
)
@placement_command
def inventory_set(api: Api, provider: str, resource_class: str, create_class: bool, **changes: Any) -> None:
    found = find_provider(api, provider)
    uuid = found["uuid"]
    given = {key: value for key, value in changes.items() if value is not None}
    if not given:
        raise click.UsageError("nothing to set: give at least one of --total, --reserved, --min-unit, ...")
    # The values are checked before the class is created: a refused inventory must leave no class behind.
    _record(found, api.client.get_inventories(uuid)[1], resource_class, given)
    _known_class(api, resource_class, create=create_class)

    def write() -> None:
        # Re-read on every attempt: a conflict means someone else changed the inventory meanwhile.
        generation, inventories = api.client.get_inventories(uuid)
        inventories[resource_class] = _record(found, inventories, resource_class, given)
        api.client.set_inventories(uuid, generation, inventories)

    retry_on_conflict(write, what=f"set {resource_class} inventory of {found['name']}")
    body = api.get(f"/resource_providers/{segment(uuid)}/inventories")
    emit(api.output, body, lambda: _render(f"inventory of {found['name']}", body["inventories"]))
    _warn_below_usage(api, found, resource_class, body["inventories"][resource_class])


def _record(
    found: dict[str, Any], inventories: dict[str, Any], resource_class: str, given: dict[str, Any]
) -> dict[str, Any]:
    """The class's inventory with the values given, refused here when the service would refuse it."""
    record = dict(inventories.get(resource_class, {}))
    if not record and "total" not in given:
        raise click.UsageError(f"{found['name']} has no {resource_class} inventory yet: give its --total")
    record.update(given)
    inventory = Inventory(**{column: record[column] for column in COLUMNS if column in record})
    reason = inventory.invalid_reason(reserved_can_be_total=True) or inventory.unallocatable_reason()
    if reason:
        raise click.UsageError(
            f"cannot set {resource_class} of {found['name']} to {_values(record)}: {reason[0].lower()}{reason[1:]}"
        )
    return record


def _values(record: dict[str, Any]) -> str:
    return ", ".join(f"{column} {record[column]}" for column in COLUMNS if column in record)


def _known_class(api: Api, name: str, *, create: bool) -> None:
    """Refuse a resource class the service does not know, unless told to create a custom one.

    The API answers 404 to an inventory of an unknown class; a typo must not create a class for good.
    """
    try:
        api.get(f"/resource_classes/{segment(name)}")
        return
    except PlacementError as error:
        if error.status != 404:
            raise
    if create and name.startswith("CUSTOM_"):
        api.client.ensure_resource_class(name)
        return
    if name.startswith("CUSTOM_"):
        hint = "check its spelling, or pass --create-class to create it"
    else:
        hint = (
            "check its spelling: a standard class is one the os-resource-classes library names "
            "(GET /resource_classes lists the service's), a custom one starts with CUSTOM_"
        )
    raise ApiFailure(f"the service has no resource class {name}\nhint: {hint}")


def _warn_below_usage(api: Api, found: dict[str, Any], resource_class: str, inventory: dict[str, Any]) -> None:
    """Say so (on stderr; the write stands) when the new capacity is below what is already allocated."""
    usages = api.get(f"/resource_providers/{segment(found['uuid'])}/usages")["usages"]
    used = int(usages.get(resource_class, 0))
    if used > capacity(inventory):
        click.echo(
            f"warning: {found['name']} now has {capacity(inventory)} {resource_class} to allocate but "
            f"{used} are allocated: nothing more of it fits until allocations free {used - capacity(inventory)}",
            err=True,
        )
