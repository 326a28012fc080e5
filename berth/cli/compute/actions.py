"""``berth server resize|confirm|revert|migrate|live-migrate|...``: one command per action of
``POST /servers/{id}/action``, each answered at once with the operation it started (``--wait``
follows it to its end)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from berth.cli.client.connection import segment
from berth.cli.compute.connection import Api, conductor_command
from berth.cli.compute.follow import conclude
from berth.cli.compute.servers import find_server, servers_group

# The command, the action's key in the API, and what the command says it does. The destination of
# a move is the scheduler's choice, as the API has it.
ACTIONS: tuple[tuple[str, str, str], ...] = (
    ("confirm", "confirmResize", "Confirm a resize or cold migration: the server stays where it went."),
    ("revert", "revertResize", "Revert a resize or cold migration: the server goes back as it was."),
    ("migrate", "migrate", "Move a server to another host, cold (then confirm or revert)."),
    ("live-migrate", "os-migrateLive", "Move a running server to another host."),
    ("evacuate", "evacuate", "Rebuild a server of a host that is down on another host."),
    ("shelve", "shelve", "Shelve a server: stopped, kept on its host."),
    ("shelve-offload", "shelveOffload", "Offload a shelved server: its host's resources are freed."),
    ("rebuild", "rebuild", "Rebuild a server in place."),
    ("soft-delete", "softDelete", "Delete a server softly: `berth server restore` brings it back."),
    ("restore", "restore", "Restore a softly deleted server."),
    (
        "force-delete",
        "forceDelete",
        "Delete a server in any state, as `berth server delete` does: a softly deleted one for good, an active, "
        "shelved or failed one too (one awaiting a resize's confirmation is confirmed first).",
    ),
)

WAIT_HELP = "follow the operation to its end; exit status 1 unless it is done"


def act(api: Api, server: str, action: str, arguments: object, wait: bool) -> None:
    found = find_server(api, server)
    answer = api.request("POST", f"/servers/{segment(found['id'])}/action", {action: arguments})
    conclude(api, [answer["operation"]], answer, wait)


def _action_command(name: str, action: str, description: str) -> click.Command:
    def run(api: Api, server: str, wait: bool) -> None:
        act(api, server, action, None, wait)

    run.__name__ = f"server_{action}"
    command: Callable[..., Any] = conductor_command(run)
    command = click.option("--wait", is_flag=True, help=WAIT_HELP)(command)
    command = click.argument("server")(command)
    return click.command(name, help=f"{description} SERVER is its id, or its name when unique.")(command)


@click.command("resize", help="Resize a server to another flavor (then confirm or revert).")
@click.argument("server")
@click.option("--flavor", required=True, help="the new flavor, by name or id")
@click.option("--wait", is_flag=True, help=WAIT_HELP)
@conductor_command
def server_resize(api: Api, server: str, flavor: str, wait: bool) -> None:
    act(api, server, "resize", {"flavorRef": flavor}, wait)


@click.command("unshelve", help="Bring a shelved server back. SERVER is its id, or its name when unique.")
@click.argument("server")
@click.option(
    "--availability-zone", "zone", metavar="ZONE", help="place an offloaded server in this zone, kept for its moves"
)
@click.option("--no-availability-zone", "unpin", is_flag=True, help="place an offloaded server in any zone from now on")
@click.option("--wait", is_flag=True, help=WAIT_HELP)
@conductor_command
def server_unshelve(api: Api, server: str, zone: str | None, unpin: bool, wait: bool) -> None:
    if zone is not None and unpin:
        raise click.UsageError("give --availability-zone or --no-availability-zone, not both")
    arguments = {"availability_zone": zone} if zone is not None else {"availability_zone": None} if unpin else None
    act(api, server, "unshelve", arguments, wait)


servers_group.add_command(server_resize)
servers_group.add_command(server_unshelve)
for _name, _action, _description in ACTIONS:
    servers_group.add_command(_action_command(_name, _action, _description))
