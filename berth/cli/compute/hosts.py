"""``berth host list|show|disable|enable|evacuate``: the hosts whose agents registered with the
conductors."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click
from rich.console import RenderableType
from rich.text import Text

from berth.cli.client.connection import segment
from berth.cli.client.output import emit, fields, table
from berth.cli.compute.connection import Api, conductor_command, not_empty
from berth.cli.compute.follow import conclude


def _heartbeat(host: dict[str, Any]) -> str | None:
    seconds = host.get("last_heartbeat_seconds_ago")
    return None if seconds is None else f"{seconds:.0f} s ago"


def _state(host: dict[str, Any]) -> Text:
    return Text(host["state"], style="green" if host["state"] == "up" else "bold red")


def _show(api: Api, host: dict[str, Any]) -> None:
    def render() -> Iterable[RenderableType]:
        yield fields(
            f"host {host['name']}",
            {
                "name": host["name"],
                "url": host["url"],
                "zone": host["zone"],
                "status": host["status"],
                "disabled reason": host.get("disabled_reason"),
                "state": host["state"],
                "servers": host.get("servers"),
                "last heartbeat": _heartbeat(host),
                "registered by": host.get("registered_by"),
            },
        )

    emit(api.output, {"host": host}, render)


@click.group("host", help="Hosts: list them, disable and enable them, evacuate one that is down.")
def host_group() -> None:
    pass


@host_group.command("list", help="List the hosts: zone, status, up or down, servers, last heartbeat.")
@conductor_command
def host_list(api: Api) -> None:
    body = api.get("/hosts")
    hosts = body["hosts"]

    def render() -> Iterable[RenderableType]:
        rows = [(h["name"], h["zone"], h["status"], _state(h), h.get("servers"), _heartbeat(h)) for h in hosts]
        yield table(f"{len(rows)} hosts", ("name", "zone", "status", "state", "servers", "last heartbeat"), rows)

    emit(api.output, body, render)


@host_group.command("show", help="Show a host.")
@click.argument("name", callback=not_empty)
@conductor_command
def host_show(api: Api, name: str) -> None:
    _show(api, api.get(f"/hosts/{segment(name)}")["host"])


@host_group.command("disable", help="Disable a host: the scheduler sends no new servers to it.")
@click.argument("name", callback=not_empty)
@click.option("--reason", default=None, help="why, shown with the host")
@conductor_command
def host_disable(api: Api, name: str, reason: str | None) -> None:
    body = {"reason": reason} if reason else None
    _show(api, api.request("POST", f"/hosts/{segment(name)}/disable", body)["host"])


@host_group.command("enable", help="Enable a host again.")
@click.argument("name", callback=not_empty)
@conductor_command
def host_enable(api: Api, name: str) -> None:
    _show(api, api.request("POST", f"/hosts/{segment(name)}/enable")["host"])


@host_group.command("evacuate", help="Rebuild every server of a host that is down on other hosts.")
@click.argument("name", callback=not_empty)
@click.option("--wait", is_flag=True, help="follow the evacuations to their end; exit status 1 unless all are done")
@conductor_command
def host_evacuate(api: Api, name: str, wait: bool) -> None:
    answer = api.request("POST", f"/hosts/{segment(name)}/evacuate")
    operations = answer["operations"]
    if not api.for_scripts:
        # As nova host-evacuate's table: every server of the host, and why one was not moved.
        for left in answer.get("left", []):
            click.echo(f"{left['server_id']} left on {name}: {left['reason']}")
        if not operations:
            click.echo(f"no server of {name} to evacuate" + ("" if answer.get("left") else " (it has none)"))
            return
    conclude(api, operations, answer, wait, listed=True)
