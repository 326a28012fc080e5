"""``berth usage show``: what a provider has handed out, as bars, or what a project holds."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlencode

import click
from rich.console import RenderableType

from berth.cli.client.connection import Api, placement_command, segment
from berth.cli.client.output import bar, capacity, emit, note, percent, table
from berth.cli.client.providers import find_provider


@click.group("usage", help="Usages: of a provider, or of a project.")
def usage_group() -> None:
    pass


@usage_group.command("show", help="Show a provider's usage against its capacity, or with --project a project's.")
@click.argument("provider", required=False)
@click.option("--project", default=None, metavar="PROJECT_ID", help="the usages of this project instead")
@click.option("--user", default=None, metavar="USER_ID", help="with --project: only this user's")
@click.option("--consumer-type", default=None, help="with --project: only consumers of this type")
@placement_command
def usage_show(
    api: Api, provider: str | None, project: str | None, user: str | None, consumer_type: str | None
) -> None:
    if (provider is None) == (project is None):
        raise click.UsageError("give either a PROVIDER or --project PROJECT_ID")
    if provider is not None and (user is not None or consumer_type is not None):
        raise click.UsageError("--user and --consumer-type narrow a project's usages: give them with --project")
    if project is not None and not project.strip():
        raise click.BadParameter("give a project id, not an empty one", param_hint="--project")
    if provider is not None:
        _provider_usage(api, provider)
        return
    query = {"project_id": project, "user_id": user, "consumer_type": consumer_type}
    body = api.get("/usages?" + urlencode({key: value for key, value in query.items() if value}))
    emit(api.output, body, lambda: _render_project(str(project), body["usages"]))


def _provider_usage(api: Api, provider: str) -> None:
    found = find_provider(api, provider)
    path = f"/resource_providers/{segment(found['uuid'])}"
    body = api.get(path + "/usages")

    def render() -> Iterable[RenderableType]:
        inventories = api.get(path + "/inventories")["inventories"]
        rows = []
        for rc in sorted(set(inventories) | set(body["usages"])):
            used = int(body["usages"].get(rc, 0))
            room = capacity(inventories[rc]) if rc in inventories else 0
            rows.append((rc, bar(used, room), used, room, percent(used, room)))
        yield table(f"usage of {found['name']}", ("class", "", "used", "capacity", "%"), rows, numeric=3)
        if not rows:
            yield note("no inventory and no usage")

    emit(api.output, body, render)


def _render_project(project: str, usages: dict[str, Any]) -> Iterable[RenderableType]:
    # Grouped by consumer type since microversion 1.38 ({"all": {...}, "INSTANCE": {...}}); flat before.
    grouped = usages if all(isinstance(value, dict) for value in usages.values()) else {"all": usages}
    rows = [
        (consumer_type, name, amount)
        for consumer_type, amounts in sorted(grouped.items())
        for name, amount in sorted(amounts.items())
    ]
    yield table(f"usages of project {project}", ("consumer type", "class", "amount"), rows, numeric=1)
    if not rows:
        yield note("the project holds nothing")
