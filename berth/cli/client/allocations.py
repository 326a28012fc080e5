"""``berth allocation show``: what one consumer holds, provider by provider."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import click
from rich.console import RenderableType

from berth.cli.client.connection import Api, placement_command, segment
from berth.cli.client.output import emit, fields, note, table


@click.group("allocation", help="Allocations of consumers.")
def allocation_group() -> None:
    pass


@allocation_group.command("show", help="Show the allocations of one consumer.")
@click.argument("consumer")
@placement_command
def allocation_show(api: Api, consumer: str) -> None:
    try:
        uuid.UUID(consumer)
    except ValueError:
        # The API answers any string with no allocations; a consumer is always named by its uuid.
        raise click.BadParameter(f"{consumer!r} is not a uuid", param_hint="'CONSUMER'") from None
    body = api.get(f"/allocations/{segment(consumer)}")
    held = body["allocations"]

    def render() -> Iterable[RenderableType]:
        if not held:
            yield note(f"consumer {consumer} holds no allocations")
            return
        keys = ("project_id", "user_id", "consumer_type", "consumer_generation")
        yield fields("consumer", {"uuid": consumer} | {key: body.get(key) for key in keys})
        rows = []
        for provider, entry in sorted(held.items()):
            name = api.get(f"/resource_providers/{segment(provider)}")["name"]
            rows += [(name, provider, rc, amount) for rc, amount in sorted(entry["resources"].items())]
        yield table("allocations", ("provider", "uuid", "class", "amount"), rows, numeric=1)

    emit(api.output, body, render)
