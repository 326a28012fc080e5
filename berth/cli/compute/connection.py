"""Where the conductors' commands send their requests, with which token, and how a failed one reads.

The conductors are ``--conductor`` (repeatable, or comma-separated; also ``$BERTH_CONDUCTOR_URL``):
any of them answers any request, and the client moves on to the next when one does not answer. The
token is ``--token`` (or ``$BERTH_TOKEN``), by default ``admin``, the noauth2 development mode's.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

import click

from berth.cli.client.connection import FORMAT_OPTION, ApiFailure
from berth.clients.conductor import DEFAULT_URL, ConductorClient, ConductorError

DEFAULT_TOKEN = "admin"
# The most items the conductors answer in one page of a list.
PAGE = 1000

# What to try next, by the error's code; then by its status when the code has no hint of its own.
CODE_HINTS = {
    "berth.server.not_found": "`berth server list` shows your servers (`--all-projects` every project's)",
    "berth.server.busy": "another operation runs on it: follow it with `berth operation show {operation}`, "
    "then ask again once it has ended",
    "berth.server.invalid_state": "`berth server show` tells the server's status; the action needs another one "
    "(a resize waits for `berth server confirm` or `revert`, a shelved server for `unshelve`)",
    "berth.server.no_valid_host": "no server was created: ask for fewer (a lower --min-count builds as many as fit), "
    "a smaller flavor, or a server group whose policy the hosts can keep; `berth host list` shows the hosts",
    "berth.quota.exceeded": "the project's quota does not allow it: `berth quota show PROJECT` shows its limits "
    "and usage; ask for fewer servers or a smaller flavor, or raise a limit with `berth quota set`",
    "berth.server.resize_same_flavor": "name another flavor (`berth flavor list`), or move the server in its "
    "flavor with `berth server migrate`",
    "berth.flavor.not_found": "`berth flavor list` shows the flavors",
    "berth.flavor.extra_spec_not_found": "`berth flavor show FLAVOR` lists its properties (extra specs)",
    "berth.flavor.duplicate": "a flavor of that name or id exists: `berth flavor show` it, or choose another name",
    "berth.flavor.invalid": "the detail names what was refused: a size (`berth flavor create --help`) or a "
    "--property extra spec (docs/scheduler.md, 'From flavor and image to query and claim', lists those read)",
    "berth.server_group.not_found": "`berth server-group list` shows the server groups",
    "berth.server_group.in_use": "delete the group's servers first (`berth server-group show` lists them)",
    "berth.host.not_found": "`berth host list` shows the hosts",
    "berth.host.down": "`berth host list` shows the hosts down; `berth server evacuate`, `shelve-offload` or `delete` "
    "do without the host, or wait until its agent is back",
    "berth.host.up": "the host is up: only a down host's servers are evacuated; disable it with "
    "`berth host disable` and move its servers with `berth server live-migrate`",
    "berth.host.in_use": "servers are still on the host: move or delete them first",
    "berth.host.registered_by_another": "another user registered this host: use their token, or an admin one",
    "berth.operation.not_found": "`berth operation list` shows the operations",
    "berth.operation.refused": "the conductor started nothing (the detail says why): `berth server show SERVER` "
    "tells the server's state, `berth operation list --server SERVER` its operations",
}
STATUS_HINTS = {
    400: "check the command's arguments against `--help`; the detail above names what was refused",
    401: "the token was not accepted: pass --token (or set $BERTH_TOKEN)",
    403: "the token lacks the role this needs: use an admin token (`--token admin` under noauth2)",
    404: "check the name or id against the list command of the same noun",
    409: "the object changed meanwhile: show it again and retry",
}
_OPERATION_ID = re.compile(r"operation ([0-9a-f-]{36})")


@dataclass
class Api:
    """The connected client and the output format asked for."""

    client: ConductorClient
    output: str

    @property
    def for_scripts(self) -> bool:
        return self.output != "table"

    def get(self, path: str) -> Any:
        return self.client.get(path)

    def request(self, method: str, path: str, body: object = None) -> Any:
        return self.client.request(method, path, body)

    def listed(
        self,
        path: str,
        collection: str,
        query: Sequence[tuple[str, str]] = (),
        limit: int | None = None,
        page: int = PAGE,
    ) -> list[dict[str, Any]]:
        """Every item of a paged list (``limit``: its first ones only), asking page after page of
        ``page`` items, each after the last item of the one before, for as long as the conductor
        says there are more (the ``next`` of ``<collection>_links``)."""
        items: list[dict[str, Any]] = []
        marker: str | None = None
        while limit is None or len(items) < limit:
            size = page if limit is None else min(limit - len(items), page)
            asked = [*query, *([("limit", str(size))] if size != PAGE else [])]
            asked += [("marker", marker)] if marker is not None else []
            body = self.get(path + ("?" + urlencode(asked) if asked else ""))
            found: list[dict[str, Any]] = body[collection]
            items += found
            more = [link for link in body.get(f"{collection}_links", ()) if link.get("rel") == "next"]
            if not more or not found:
                break
            marker = str(found[-1]["id"])
        return items


def explain_failure(error: ConductorError, urls: Sequence[str]) -> ApiFailure:
    if error.status == 0 and error.sent:
        # A conductor took the request and did not answer in time: it may have carried it out, so
        # asking again blindly could build a second server or start a second operation.
        return ApiFailure(
            f"{str(error).split(': ', 1)[0]}: the conductor did not answer in time ({error.detail}); "
            "the request may have been carried out.\n"
            "hint: look before asking again: `berth operation list` shows the operations started, "
            "`berth server list` the servers"
        )
    if error.status == 0:
        return ApiFailure(
            f"no conductor answered at {', '.join(urls)}.\n"
            "hint: is one running? Start one with `berth conductor --placement URL --database URL`, "
            "or point --conductor (or $BERTH_CONDUCTOR_URL) at one"
        )
    request = str(error).split(": ", 1)[0]
    code = f" {error.code}" if error.code else ""
    hint = CODE_HINTS.get(error.code or "") or STATUS_HINTS.get(error.status, "")
    if not hint and error.status >= 500:
        hint = "see the conductor's log for the cause"
    if "{operation}" in hint:
        found = _OPERATION_ID.search(error.detail)
        hint = hint.format(operation=found.group(1) if found else "ID")
    message = f"{request} answered {error.status}{code}: {' '.join(error.detail.split())}"
    return ApiFailure(message + (f"\nhint: {hint}" if hint else ""))


def not_empty(_context: click.Context, parameter: click.Parameter, value: str | None) -> str | None:
    """Refuse an empty name or id of the object a command acts on: its path would name the whole
    collection (``GET /hosts/`` is the list of hosts), not one object of it."""
    if value is not None and not value.strip():
        raise click.BadParameter("give a name or id, not an empty one", param=parameter)
    return value


def conductor_urls(given: Sequence[str]) -> list[str]:
    """The URLs given (each may list several, comma-separated), checked for their scheme."""
    urls = [url.strip() for value in given for url in value.split(",") if url.strip()] or [DEFAULT_URL]
    for url in urls:
        if urlsplit(url).scheme not in ("http", "https"):
            raise click.UsageError(
                f"the conductor {url!r} (--conductor or $BERTH_CONDUCTOR_URL) needs its scheme: http://{url}"
            )
    return urls


def conductor_command(command: Callable[..., None]) -> Callable[..., None]:
    """Give a command the connection options and an ``Api`` as its first argument, and word its failures."""

    @functools.wraps(command)
    def run(*args: Any, conductor: tuple[str, ...], token: str | None, output: str, **kwargs: Any) -> None:
        urls = conductor_urls(conductor)
        # An operator at a terminal: the token's roles alone (noauth2's admin: the admin role).
        client = ConductorClient(urls, token or DEFAULT_TOKEN, timeout=60.0)
        try:
            command(Api(client, output), *args, **kwargs)
        except ConductorError as error:
            raise explain_failure(error, urls) from None

    options = [
        click.option(
            "--conductor",
            multiple=True,
            envvar="BERTH_CONDUCTOR_URL",
            metavar="URL",
            help=f"a conductor's URL; repeatable, any one answers (default: {DEFAULT_URL}; "
            "also $BERTH_CONDUCTOR_URL, comma-separated)",
        ),
        click.option(
            "--token",
            envvar="BERTH_TOKEN",
            default=None,
            metavar="TOKEN",
            help=f"X-Auth-Token (default: {DEFAULT_TOKEN!r}, noauth2's admin; also $BERTH_TOKEN)",
        ),
        FORMAT_OPTION,
    ]
    decorated: Callable[..., None] = run
    for option in reversed(options):
        decorated = option(decorated)
    return decorated
