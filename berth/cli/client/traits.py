"""``berth trait list``: the traits the service knows, or those of one provider."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlencode

import click
from rich.console import RenderableType

from berth.cli.client.connection import Api, placement_command, segment
from berth.cli.client.output import emit, table
from berth.cli.client.providers import find_provider


@click.group("trait", help="Traits.")
def trait_group() -> None:
    pass


@trait_group.command("list", help="List the traits, or the traits of one provider.")
@click.option("--provider", default=None, help="the traits of this provider (name or uuid)")
@click.option("--prefix", default=None, help="only the traits whose names start with this (CUSTOM_, HW_, ...)")
@click.option("--associated/--unassociated", default=None, help="only the traits some provider has, or none has")
@placement_command
def trait_list(api: Api, provider: str | None, prefix: str | None, associated: bool | None) -> None:
    if provider is not None and associated is not None:
        raise click.UsageError("--associated and --unassociated list the service's traits: leave out --provider")
    if provider is not None:
        found = find_provider(api, provider)
        body = api.get(f"/resource_providers/{segment(found['uuid'])}/traits")
        title = f"traits of {found['name']}"
    else:
        query = {}
        if prefix:
            query["name"] = f"startswith:{prefix}"
        if associated is not None:
            query["associated"] = "true" if associated else "false"
        body = api.get("/traits" + ("?" + urlencode(query) if query else ""))
        title = "traits"
    names = sorted(body["traits"])
    if provider is not None and prefix:
        # The API has no filter of a provider's traits: the answer is filtered here, for every format.
        names = [name for name in names if name.startswith(prefix)]
        body = {**body, "traits": [name for name in body["traits"] if name.startswith(prefix)]}

    def render() -> Iterable[RenderableType]:
        yield table(f"{len(names)} {title}", ("trait",), [(name,) for name in names])

    emit(api.output, body, render)
