"""Following operations to their end (``--wait``), or saying how to follow them later.

The conductors answer an action at once with the operation it started; ``--wait`` polls
``GET /operations/{id}`` and prints each step as it is done, each host that refused and why, and the
end. An operation that failed or was rolled back makes the command exit with status 1.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import click

from berth.cli.client.output import emit
from berth.cli.compute.connection import Api

POLL_SECONDS = 0.2
ENDS = {"done": "done", "failed": "failed", "rolled_back": "rolled back"}


class OperationFailed(click.ClickException):
    """An operation followed did not end done; exit status 1."""

    exit_code = 1


@dataclass
class _Followed:
    """One operation and how much of it has been printed."""

    label: str
    operation: dict[str, Any]
    # The steps printed: a resume runs an operation's steps again from its first, and its
    # ``steps_done`` starts over with them, which says nothing new.
    steps: set[str] = field(default_factory=set)
    attempts: int = 0
    ended: bool = False
    # The error of the running operation last printed, its numbers left out (see ``_report``).
    waiting: str | None = None


def follow(api: Api, operations: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """Poll each ``(label, operation id)`` until it ends, printing its progress; the operations as they ended.

    The lines go to standard output for people, to standard error when the output is JSON or YAML
    (which then carries the result alone)."""
    err = api.for_scripts
    followed = [_Followed(label, api.get(f"/operations/{op_id}")["operation"]) for label, op_id in operations]
    for item in followed:
        click.echo(f"{item.label}{item.operation['kind']} {item.operation['id']} started", err=err)
    try:
        while True:
            for item in followed:
                _report(item, err)
            if all(item.ended for item in followed):
                break
            time.sleep(POLL_SECONDS)
            for item in followed:
                if not item.ended:
                    item.operation = api.get(f"/operations/{item.operation['id']}")["operation"]
    except KeyboardInterrupt:
        ids = " ".join(item.operation["id"] for item in followed if not item.ended)
        raise OperationFailed(f"stopped following; the operations go on (`berth operation show ID`): {ids}") from None
    return [item.operation for item in followed]


def _report(item: _Followed, err: bool) -> None:
    op = item.operation
    for step in op["steps_done"]:
        if step not in item.steps:
            item.steps.add(step)
            click.echo(f"{item.label}  step {step} done", err=err)
    for attempt in op["attempts"][item.attempts :]:
        click.echo(f"{item.label}  host {attempt['host'] or '(scheduler)'} refused: {attempt['reason']}", err=err)
    item.attempts = len(op["attempts"])
    error = op.get("error")
    if op["state"] == "running" and error and _gist(error) != item.waiting:
        # Stopped short of its end, waiting for a conductor to try again: a host away, say. Said
        # once, not at every try (whose words differ only in their numbers: a port, milliseconds).
        item.waiting = _gist(error)
        click.echo(
            f"{item.label}  waiting: {error}\n{item.label}  (the conductors try it again; Ctrl-C stops following, "
            "the operation goes on)",
            err=err,
        )
    if op["state"] != "running" and not item.ended:
        item.ended = True
        where = f" on {op['host']}" if op.get("host") else ""
        click.echo(f"{item.label}{op['kind']} {op['id']} {ENDS.get(op['state'], op['state'])}{where}", err=err)
        if op.get("error"):
            click.echo(f"{item.label}  error: {op['error']}", err=err)


def _gist(error: str) -> str:
    """What the error says, without who said it (``resume failed: ``, ``finishing failed: ``) and
    its numbers."""
    return re.sub(r"\d+", "#", re.sub(r"^[\w ]*? failed: ", "", error))


def check_ended(operations: Sequence[dict[str, Any]]) -> None:
    """Raise ``OperationFailed`` naming those that did not end done (their errors were printed as they ended)."""
    bad = [op for op in operations if op["state"] != "done"]
    if bad:
        said = "; ".join(f"{op['kind']} {op['id']} {ENDS.get(op['state'], op['state'])}" for op in bad)
        raise OperationFailed(
            f"{said}\nhint: `berth server show {bad[0]['server_id']}` tells the server's state and fault"
        )


def label(server_id: str) -> str:
    """What the lines of one of several operations followed start with: its server's id, shortened."""
    return f"{server_id[:8]}: "


def how_to_follow(operations: Sequence[dict[str, Any]]) -> None:
    """Without ``--wait``: each operation started, and how to follow it."""
    for op in operations:
        server = f" of server {op['server_id']}" if op.get("server_id") else ""
        click.echo(f"{op['kind']}{server} started: operation {op['id']}")
    if operations:
        click.echo(f"follow it with `berth operation show {operations[0]['id']}`, or ask with --wait next time")


def conclude(api: Api, operations: Sequence[dict[str, Any]], answer: Any, wait: bool, *, listed: bool = False) -> None:
    """The end of a command that started ``operations`` (the API's ``answer``): followed to their end
    with ``--wait`` (the operations as they ended for scripts), else how to follow them.

    ``listed``: the answer lists its operations (``{"operations": [...], ...}``, none or several),
    and so does the answer for scripts with ``--wait``, its other fields kept; else the answer is
    one ``{"operation": ...}``."""
    if not wait:
        if api.for_scripts:
            emit(api.output, answer, list)
        else:
            how_to_follow(operations)
        return
    several = len(operations) > 1
    ended = follow(api, [(label(op["server_id"]) if several else "", op["id"]) for op in operations])
    if api.for_scripts:
        emit(api.output, {**answer, "operations": ended} if listed else {"operation": ended[0]}, list)
    check_ended(ended)
