"""``berth quota set|show|list|delete``: per-project quotas, Berth's own (docs/pick-and-claim.md, "Quotas")."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import click
from rich.console import RenderableType

from berth.cli.client.connection import Api, ApiFailure, explain_failure, placement_command, segment
from berth.cli.client.output import bar, emit, note, percent, table
from berth.clients.errors import PlacementError

# The resource of a limit on the number of consumers holding allocations.
CONSUMERS = "consumers"
# The largest limit the service takes (a signed 64-bit integer, as its schema says).
MOST_LIMIT = 2**63 - 1
_WHOLE = re.compile(r"[0-9]+")

# What to do next, for the answers a quota command may get, in place of the general hints.
_HINTS = {
    400: "a limit is --limit CLASS=N with N zero or more, on a resource class the service knows "
    f"(GET /resource_classes lists them) or on {CONSUMERS!r}",
    403: "quotas are an administrator's by default (policy berth:quotas:*): use an admin token",
}


@click.group("quota", help="Quotas: limits per project (and per user) on resource classes and consumers.")
def quota_group() -> None:
    pass


def _named(_context: click.Context, parameter: click.Parameter, value: str | None) -> str | None:
    """Refuse an empty project or user id: its path would name the list (a bare 405), not a project."""
    if value is not None and not value.strip():
        raise click.BadParameter("give a project or user id, not an empty one", param=parameter)
    return value


def _path(project: str, user: str | None) -> str:
    return f"/berth/quotas/{segment(project)}" + (f"/users/{segment(user)}" if user else "")


def _whose(project: str, user: str | None) -> str:
    return f"project {project}" if user is None else f"user {user} of project {project}"


@contextmanager
def _explained(api: Api) -> Iterator[None]:
    """The service's refusals, with what to do about them in the words of quotas."""
    try:
        yield
    except PlacementError as error:
        failure = explain_failure(error, api.client.url)
        hint = _HINTS.get(error.status)
        if hint is None:
            raise failure from None
        raise ApiFailure(failure.message.split("\nhint: ")[0] + f"\nhint: {hint}") from None


def _limits(values: Iterable[str]) -> dict[str, int]:
    limits: dict[str, int] = {}
    for value in values:
        name, sep, amount = value.partition("=")
        name, amount = name.strip(), amount.strip()
        if not sep or not name or not _WHOLE.fullmatch(amount):
            raise click.BadParameter(
                f"{value!r}: give CLASS=N with N a whole number, e.g. --limit VCPU=64 or --limit {CONSUMERS}=10",
                param_hint="--limit",
            )
        if int(amount) > MOST_LIMIT:
            raise click.BadParameter(f"{value!r}: a limit is at most {MOST_LIMIT}", param_hint="--limit")
        if name in limits:
            raise click.BadParameter(f"{name} is given twice: give each class one limit", param_hint="--limit")
        limits[name] = int(amount)
    return limits


@quota_group.command("set", help="Replace the limits of a project (or, with --user, of one of its users).")
@click.argument("project", callback=_named)
@click.option(
    "--limit",
    "limits",
    multiple=True,
    required=True,
    metavar="CLASS=N",
    help=f"the most the project may hold of a resource class, or of {CONSUMERS!r}; repeatable. "
    "Classes left out have no limit",
)
@click.option(
    "--user", default=None, callback=_named, metavar="USER_ID", help="the limits of this user within the project"
)
@placement_command
def quota_set(api: Api, project: str, limits: tuple[str, ...], user: str | None) -> None:
    wanted = _limits(limits)
    with _explained(api):
        body = api.request("PUT", _path(project, user), {"limits": wanted})
    emit(api.output, body, lambda: _render(body, user))


@quota_group.command("show", help="Show the limits of a project (or of one of its users) against its usage.")
@click.argument("project", callback=_named)
@click.option(
    "--user",
    default=None,
    callback=_named,
    metavar="USER_ID",
    help="the limits and usage of this user within the project",
)
@placement_command
def quota_show(api: Api, project: str, user: str | None) -> None:
    with _explained(api):
        body = api.get(_path(project, user))
    emit(api.output, body, lambda: _render(body, user))


@quota_group.command("list", help="List the projects with limits, each limit against its usage.")
@placement_command
def quota_list(api: Api) -> None:
    with _explained(api):
        body = api.get("/berth/quotas")

    def render() -> Iterable[RenderableType]:
        rows = [
            (quota["project_id"], resource, bar(used, limit), used, limit, percent(used, limit))
            for quota in body["quotas"]
            for resource, limit, used in _against(quota)
        ]
        if not body["quotas"]:
            yield note("no project has limits")
            return
        yield table(
            f"{len(body['quotas'])} projects with limits",
            ("project", "resource", "", "used", "limit", "%"),
            rows,
            numeric=3,
        )
        for quota in body["quotas"]:
            if quota.get("users"):
                yield note(
                    f"users of project {quota['project_id']} with limits of their own: " + ", ".join(quota["users"])
                )

    emit(api.output, body, render)


@quota_group.command("delete", help="Remove the limits of a project, its users' too (or, with --user, one user's).")
@click.argument("project", callback=_named)
@click.option(
    "--user", default=None, callback=_named, metavar="USER_ID", help="only the limits of this user within the project"
)
@placement_command
def quota_delete(api: Api, project: str, user: str | None) -> None:
    try:
        with _explained(api):
            api.request("DELETE", _path(project, user))
    except ApiFailure as failure:
        if "answered 404" not in failure.message:
            raise
        raise ApiFailure(
            f"{_whose(project, user)} has no limits to delete.\nhint: `berth quota list` shows the projects "
            "with limits, `berth quota show PROJECT` a project's users with limits"
        ) from None
    deleted = {"deleted": {"project_id": project, "user_id": user}}
    emit(api.output, deleted, lambda: [note(f"removed the limits of {_whose(project, user)}")])


def _against(quota: Mapping[str, Any]) -> list[tuple[str, int, int]]:
    """(resource, limit, usage) of each limit."""
    return [(resource, int(limit), int(quota["usage"].get(resource, 0))) for resource, limit in quota["limits"].items()]


def _render(body: Mapping[str, Any], user: str | None) -> Iterable[RenderableType]:
    whose = _whose(body["project_id"], user)
    limited: list[tuple[object, ...]] = [
        (resource, bar(used, limit), used, limit, percent(used, limit)) for resource, limit, used in _against(body)
    ]
    unlimited: list[tuple[object, ...]] = [
        (resource, "", used, "none", "-") for resource, used in body["usage"].items() if resource not in body["limits"]
    ]
    yield table(f"quota of {whose}", ("resource", "", "used", "limit", "%"), limited + unlimited, numeric=3)
    if not body["limits"]:
        yield note(f"{whose} has no limits: every resource is unlimited")
    if body.get("users"):
        yield note("users with limits of their own: " + ", ".join(body["users"]))
