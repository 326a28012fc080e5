"""``berth server create|list|show|delete``, and finding a server by id or by its name."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlencode

import click
from rich.console import RenderableType

from berth.cli.client.connection import ApiFailure, segment
from berth.cli.client.output import emit, fields, table
from berth.cli.client.providers import is_uuid
from berth.cli.compute.connection import Api, conductor_command
from berth.cli.compute.follow import check_ended, conclude, follow, label
from berth.cli.compute.server_groups import find_server_group
from berth.clients.conductor import ConductorError
from berth.conductor.records.server_states import DELETED, STATUSES


def key_values(values: Sequence[str], option: str) -> dict[str, str]:
    """``k=v`` pairs of a repeated option as a mapping; a usage error for one without ``=``."""
    pairs: dict[str, str] = {}
    for value in values:
        key, equals, rest = value.partition("=")
        if not equals or not key:
            raise click.BadParameter(f"{value!r} is not KEY=VALUE", param_hint=option)
        pairs[key] = rest
    return pairs


def find_server(api: Api, reference: str) -> dict[str, Any]:
    """The server with this id, or the only one with this name (the caller's project first, then,
    for an admin, every project's); an error saying what to do when none or several are."""
    if is_uuid(reference):
        try:
            return dict(api.get(f"/servers/{segment(reference)}")["server"])
        except ConductorError as error:
            if error.status != 404:
                raise
    named = _named(api, reference, "")
    if not named:
        try:
            named = _named(api, reference, "?all_projects=1")
        except ConductorError as error:
            if error.status != 403:
                raise
    if not named:
        raise ApiFailure(
            f"no server named or with id {reference!r}\n"
            "hint: `berth server list` shows your servers (`--all-projects` every project's)"
        )
    if len(named) > 1:
        listed = "\n".join(
            f"  {s['id']}  {s['status']}  on {s['OS-EXT-SRV-ATTR:host'] or '-'}  project {s['tenant_id']}"
            for s in named
        )
        raise ApiFailure(f"{len(named)} servers are named {reference!r}:\n{listed}\nhint: name the server by its id")
    return named[0]


def _named(api: Api, name: str, query: str) -> list[dict[str, Any]]:
    joined = "&" if query else "?"
    # The API takes a name as a regular expression, as Nova does: this one, whole.
    exact = urlencode({"name": f"^{re.escape(name)}$"})
    return [s for s in api.get(f"/servers{query}{joined}{exact}")["servers"] if s["name"] == name]


def flavor_summary(flavor: dict[str, Any]) -> str:
    return f"{flavor['original_name']} ({flavor['vcpus']} vcpus, {flavor['ram']} MB, {flavor['disk']} GB)"


def task(server: dict[str, Any]) -> str | None:
    running = server.get("operation")
    return f"{running['kind']}: {running['step'] or 'starting'}" if running else None


@click.group("server", help="Servers: build, list, show, delete, and one command per action (resize, migrate, ...).")
def servers_group() -> None:
    pass


@servers_group.command("create", help="Build NAME (or COUNT servers named NAME-1, ...) of a flavor.")
@click.argument("name")
@click.option("--flavor", required=True, help="the flavor, by name or id")
@click.option(
    "--image-property",
    "image_properties",
    multiple=True,
    metavar="KEY=VALUE",
    help="a property of the image the scheduler filters on; repeatable",
)
@click.option("--availability-zone", default=None, metavar="ZONE", help="build in this zone only")
@click.option("--server-group", default=None, metavar="GROUP", help="join this server group (name or id)")
@click.option("--count", type=click.IntRange(1, 1000), default=1, show_default=True, help="how many to build")
@click.option("--min-count", type=click.IntRange(1, 1000), default=None, help="build none unless this many fit")
@click.option("--wait", is_flag=True, help="follow the builds to their end; exit status 1 unless all are done")
@conductor_command
def server_create(
    api: Api,
    name: str,
    flavor: str,
    image_properties: tuple[str, ...],
    availability_zone: str | None,
    server_group: str | None,
    count: int,
    min_count: int | None,
    wait: bool,
) -> None:
    if min_count is not None and min_count > count:
        raise click.BadParameter(f"{min_count} is above --count ({count})", param_hint="--min-count")
    asked: dict[str, Any] = {"name": name, "flavorRef": flavor}
    if image_properties:
        asked["image_properties"] = key_values(image_properties, "--image-property")
    if availability_zone:
        asked["availability_zone"] = availability_zone
    if count > 1 or min_count is not None:
        asked["max_count"] = count
        asked["min_count"] = min_count or count
    body: dict[str, Any] = {"server": asked}
    if server_group:
        body["os:scheduler_hints"] = {"group": find_server_group(api, server_group)["id"]}
    answer = api.request("POST", "/servers", body)
    # A multi-create (--count above 1) is answered with a list of servers, of one when no more fit.
    several = "servers" in answer
    made = answer["servers"] if several else [answer["server"]]
    if not wait:
        if api.for_scripts:
            emit(api.output, answer, list)
            return
        names = _built_names(api, name, made) if several else {made[0]["id"]: name}
        for server in made:
            click.echo(f"server {server['id']} ({names[server['id']]}) is building: operation {server['operation_id']}")
        click.echo(f"follow it with `berth operation show {made[0]['operation_id']}`, or ask with --wait next time")
        return
    ended = follow(api, [(label(s["id"]) if several else "", s["operation_id"]) for s in made])
    if api.for_scripts:
        views = [api.get(f"/servers/{segment(s['id'])}")["server"] for s in made]
        emit(api.output, {"servers": views} if several else {"server": views[0]}, list)
    check_ended(ended)


def _built_names(api: Api, name: str, made: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Each server of a multi-create, by id: its name. They are named NAME-1, NAME-2, ... by their
    place in the request (those placed of a --min-count: not always the first ones), which the
    answer does not say; their list does."""
    named = api.listed("/servers", "servers", [("name", f"^{re.escape(name)}-\\d+$")])
    found = {s["id"]: s["name"] for s in named}
    return {s["id"]: found.get(s["id"], f"{name}-N") for s in made}


@servers_group.command("list", help="List the servers, newest first (your project's, or every project's).")
@click.option("--host", default=None, help="only the servers on this host")
@click.option("--status", type=click.Choice(STATUSES, case_sensitive=False), default=None, help="only in this status")
@click.option("--all-projects", is_flag=True, help="every project's servers (admin)")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="only the newest this many (default: all)")
@conductor_command
def server_list(api: Api, host: str | None, status: str | None, all_projects: bool, limit: int | None) -> None:
    query = [(k, v) for k, v in (("host", host), ("status", status and status.upper())) if v]
    if status and status.upper() == DELETED:
        # Deleted servers are listed only when asked for (``deleted=1``), as Nova lists them.
        query.append(("deleted", "1"))
    if all_projects:
        query.append(("all_projects", "1"))
    servers = api.listed("/servers", "servers", query, limit)
    body = {"servers": servers}

    def render() -> Iterable[RenderableType]:
        rows = [
            (
                s["id"],
                s["name"],
                s["status"],
                task(s),
                s["OS-EXT-SRV-ATTR:host"],
                s["OS-EXT-AZ:availability_zone"],
                s["flavor"]["original_name"],
            )
            for s in servers
        ]
        yield table(f"{len(rows)} servers", ("id", "name", "status", "task", "host", "zone", "flavor"), rows)

    emit(api.output, body, render)


@servers_group.command("show", help="Show one server (by id, or by its name when unique) and its allocations.")
@click.argument("server")
@conductor_command
def server_show(api: Api, server: str) -> None:
    found = find_server(api, server)
    # A server found by name comes from a list, which leaves its allocations out.
    shown = found if "allocations" in found else api.get(f"/servers/{segment(found['id'])}")["server"]

    def render() -> Iterable[RenderableType]:
        running = shown.get("operation")
        yield fields(
            f"server {shown['name']}",
            {
                "id": shown["id"],
                "status": shown["status"],
                "vm state": shown["OS-EXT-STS:vm_state"],
                "task state": shown["OS-EXT-STS:task_state"],
                "host": shown["OS-EXT-SRV-ATTR:host"],
                "availability zone": shown["OS-EXT-AZ:availability_zone"],
                "flavor": flavor_summary(shown["flavor"]),
                "image properties": _pairs(shown["image"]["properties"]),
                "server groups": ", ".join(shown["server_groups"]) or None,
                "operation": f"{running['kind']} {running['id']} at {running['step'] or 'its start'}"
                if running
                else None,
                "fault": (shown.get("fault") or {}).get("message"),
                "project": shown["tenant_id"],
                "user": shown["user_id"],
                "created": shown["created"],
                "updated": shown["updated"],
            },
        )
        rows = [
            (provider, _pairs(held.get("resources", {})))
            for provider, held in sorted((shown.get("allocations") or {}).items())
        ]
        yield table("allocations", ("resource provider", "resources"), rows)

    emit(api.output, {"server": shown}, render)


def _pairs(values: dict[str, Any]) -> str | None:
    return ", ".join(f"{key}={value}" for key, value in sorted(values.items())) or None


@servers_group.command("delete", help="Delete a server (by id, or by its name when unique).")
@click.argument("server")
@click.option("--wait", is_flag=True, help="follow the deletion to its end; exit status 1 unless it is done")
@conductor_command
def server_delete(api: Api, server: str, wait: bool) -> None:
    found = find_server(api, server)
    answer = api.request("DELETE", f"/servers/{segment(found['id'])}")
    conclude(api, [answer["operation"]], answer, wait)
