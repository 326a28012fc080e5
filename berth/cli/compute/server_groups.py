"""``berth server-group create|list|show|delete``: the policies servers are placed under."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click
from rich.console import RenderableType

from berth.cli.client.connection import ApiFailure, segment
from berth.cli.client.output import emit, fields, table
from berth.cli.client.providers import is_uuid
from berth.cli.compute.connection import Api, conductor_command
from berth.clients.conductor import ConductorError

POLICIES = ("affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity")


def find_server_group(api: Api, reference: str) -> dict[str, Any]:
    """The group with this id, or the only one of the caller's project with this name."""
    if is_uuid(reference):
        try:
            return dict(api.get(f"/os-server-groups/{segment(reference)}")["server_group"])
        except ConductorError as error:
            if error.status != 404:
                raise
    named = [g for g in api.get("/os-server-groups")["server_groups"] if g["name"] == reference]
    if not named:
        raise ApiFailure(
            f"no server group named or with id {reference!r}\nhint: `berth server-group list` shows the server groups"
        )
    if len(named) > 1:
        listed = "\n".join(f"  {g['id']}  {g['policy']}" for g in named)
        raise ApiFailure(f"{len(named)} server groups are named {reference!r}:\n{listed}\nhint: name it by its id")
    return dict(named[0])


def _rules(group: dict[str, Any]) -> str | None:
    return ", ".join(f"{k}={v}" for k, v in sorted(group["rules"].items())) or None


@click.group("server-group", help="Server groups: affinity and anti-affinity policies.")
def server_groups_group() -> None:
    pass


@server_groups_group.command("create", help="Create the server group NAME.")
@click.argument("name")
@click.option("--policy", type=click.Choice(POLICIES), required=True, help="where the members go")
@click.option(
    "--max-server-per-host",
    type=click.IntRange(1),
    default=None,
    metavar="N",
    help="anti-affinity: at most N members on one host",
)
@conductor_command
def server_group_create(api: Api, name: str, policy: str, max_server_per_host: int | None) -> None:
    asked: dict[str, Any] = {"name": name, "policy": policy}
    if max_server_per_host is not None:
        asked["rules"] = {"max_server_per_host": max_server_per_host}
    _show(api, api.request("POST", "/os-server-groups", {"server_group": asked})["server_group"])


def _show(api: Api, group: dict[str, Any]) -> None:
    def render() -> Iterable[RenderableType]:
        yield fields(
            f"server group {group['name']}",
            {
                "id": group["id"],
                "name": group["name"],
                "policy": group["policy"],
                "rules": _rules(group),
                "members": ", ".join(group["members"]) or None,
                "project": group["project_id"],
                "user": group["user_id"],
            },
        )

    emit(api.output, {"server_group": group}, render)


@server_groups_group.command("list", help="List the server groups (your project's, or every project's).")
@click.option("--all-projects", is_flag=True, help="every project's groups (admin)")
@conductor_command
def server_group_list(api: Api, all_projects: bool) -> None:
    body = api.get("/os-server-groups" + ("?all_projects=1" if all_projects else ""))
    groups = body["server_groups"]

    def render() -> Iterable[RenderableType]:
        rows = [(g["id"], g["name"], g["policy"], _rules(g), len(g["members"])) for g in groups]
        yield table(f"{len(rows)} server groups", ("id", "name", "policy", "rules", "members"), rows, numeric=1)

    emit(api.output, body, render)


@server_groups_group.command("show", help="Show a server group, by id or by its name when unique.")
@click.argument("group")
@conductor_command
def server_group_show(api: Api, group: str) -> None:
    _show(api, find_server_group(api, group))


@server_groups_group.command("delete", help="Delete a server group, by id or by its name when unique.")
@click.argument("group")
@conductor_command
def server_group_delete(api: Api, group: str) -> None:
    found = find_server_group(api, group)
    api.request("DELETE", f"/os-server-groups/{segment(found['id'])}")
    if api.for_scripts:
        emit(api.output, {"deleted": found["id"]}, list)
    else:
        click.echo(f"server group {found['name']} ({found['id']}) deleted")
