"""``berth operation list|show``: the conductors' journal of server operations."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click
from rich.console import RenderableType

from berth.cli.client.connection import ApiFailure, segment
from berth.cli.client.output import emit, fields, table
from berth.cli.client.providers import is_uuid
from berth.cli.compute.connection import PAGE, Api, conductor_command, not_empty
from berth.cli.compute.servers import find_server
from berth.conductor.journal import STATES


def _attempts(operation: dict[str, Any]) -> str | None:
    return "; ".join(f"{a['host'] or '(scheduler)'}: {a['reason']}" for a in operation["attempts"]) or None


@click.group("operation", help="Operations on servers, as the conductors journal them step by step.")
def operation_group() -> None:
    pass


def _server_id(api: Api, reference: str) -> str:
    """The id of the server named: found as ``find_server`` finds it, or, for an id no server
    shown has (a deleted server's, whose operations stay readable), the id as it is: the
    conductors answer its operations, or say that no server has it."""
    try:
        return str(find_server(api, reference)["id"])
    except ApiFailure:
        if is_uuid(reference):
            return reference
        raise


@operation_group.command(
    "list", help="List operations, newest first: your project's servers' (an admin's: every project's)."
)
@click.option("--server", default=None, help="only this server's (id, deleted servers' too, or name when unique)")
@click.option("--state", type=click.Choice(STATES), default=None, help="only in this state")
@click.option("--kind", default=None, help="only of this kind (build, resize, live_migrate, ...)")
@click.option("--limit", type=click.IntRange(min=1), default=PAGE, show_default=True, help="only the newest this many")
@conductor_command
def operation_list(api: Api, server: str | None, state: str | None, kind: str | None, limit: int) -> None:
    query = [(k, v) for k, v in (("state", state), ("kind", kind)) if v]
    if server:
        query.insert(0, ("server_id", _server_id(api, server)))
    operations = api.listed("/operations", "operations", query, limit)
    body = {"operations": operations}

    def render() -> Iterable[RenderableType]:
        rows = [
            (o["id"], o["kind"], o["state"], o["step"], o["server_id"], o["host"], o["updated_at"]) for o in operations
        ]
        yield table(f"{len(rows)} operations", ("id", "kind", "state", "step", "server", "host", "updated"), rows)

    emit(api.output, body, render)


@operation_group.command("show", help="Show an operation: its steps done, the hosts tried, its end.")
@click.argument("operation", callback=not_empty)
@conductor_command
def operation_show(api: Api, operation: str) -> None:
    body = api.get(f"/operations/{segment(operation)}")
    found = body["operation"]

    def render() -> Iterable[RenderableType]:
        yield fields(
            f"operation {found['id']}",
            {
                "kind": found["kind"],
                "state": found["state"],
                "step": found["step"],
                "steps done": ", ".join(found["steps_done"]) or None,
                "server": found["server_id"],
                "source": found["source"],
                "host": found["host"],
                "hosts refused": _attempts(found),
                "error": found["error"],
                "owner": found["owner"],
                "created": found["created_at"],
                "updated": found["updated_at"],
            },
        )

    emit(api.output, body, render)
