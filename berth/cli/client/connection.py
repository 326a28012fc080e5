"""Where the client commands send their requests, with which token, and how a failed one reads.

The endpoint is ``--url`` (or ``$BERTH_URL``), the token ``--token`` (or ``$BERTH_TOKEN``). Without a
token, when ``$OS_AUTH_URL`` is set and keystoneauth1 is installed (the ``keystone`` extra), a
keystoneauth session authenticates from the usual ``OS_*`` variables and, unless a URL is given,
finds Placement in the service catalog. Otherwise the token is ``admin``, the noauth2 development mode's.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import click

from berth.clients.errors import PlacementError
from berth.clients.placement import PlacementClient

DEFAULT_URL = "http://127.0.0.1:8778"
DEFAULT_TOKEN = "admin"
FORMATS = ("table", "json", "yaml")
# The output format, as every client command (of the service's or of the conductors') takes it.
FORMAT_OPTION = click.option(
    "-f",
    "--format",
    "output",
    type=click.Choice(FORMATS),
    default="table",
    show_default=True,
    help="tables for people, or the API's data as JSON or YAML for scripts",
)

# What to try next, by the status Placement answered with (401, 403 and 404 name what the command
# was given: ``Given``, below).
HINTS = {
    400: "check the command's arguments against `--help`; the detail above names what the service refused",
    406: "the service does not speak the microversion asked for: is it a Placement service of release Yoga or later?",
    409: "someone else changed it meanwhile: read it again and retry",
}


@dataclass(frozen=True)
class Given:
    """How a command was given the endpoint and the token, so that its hints name its own options."""

    url: str = "--url (or $BERTH_URL)"
    token: str = "--token (or set $BERTH_TOKEN), or the OS_* variables of Keystone"
    # A 404 at a path the service has: what was looked up is not there. None: the command reads
    # only what exists (a whole service's books), so a 404 says the endpoint is not Placement's.
    not_found: str | None = "check the name or uuid: `berth provider list` shows the providers"
    # What to check when nothing answers at the URL ({url}: how it was given).
    unreachable: str = "is the service running? Start one with `berth serve`, or point {url} at one"


CLIENT_COMMANDS = Given()


class ApiFailure(click.ClickException):
    """A request that failed, said with what to do; exit status 1."""

    exit_code = 1


@dataclass
class Api:
    """The connected client and the output format asked for."""

    client: PlacementClient
    output: str

    def get(self, path: str) -> Any:
        return self.client.get(path)

    def request(self, method: str, path: str, body: object = None) -> Any:
        return self.client.request(method, path, body)


def segment(value: str) -> str:
    """One path segment, quoted: a name or uuid typed by hand never changes the path."""
    return quote(value, safe="")


def explain_failure(error: PlacementError, url: str, given: Given = CLIENT_COMMANDS) -> ApiFailure:
    if error.status == 0:
        return ApiFailure(
            f"cannot reach Placement at {url}: {_transport_reason(error.detail)}\n"
            f"hint: {given.unreachable.format(url=given.url)}"
        )
    request = str(error).split(": ", 1)[0]
    code = f" {error.code}" if error.code else ""
    detail = _readable(error.detail)
    if error.status == 401:
        hint = f"the token was not accepted: pass {given.token}"
    elif error.status == 403:
        hint = f"the token lacks the role this needs: pass an admin (or service) token with {given.token}"
    elif error.status == 404 and (detail == _NO_SUCH_PATH or given.not_found is None):
        # Nothing more than the stock sentence: no route at all, not a missing provider or class.
        hint = (
            f"the service at {url} has no such path: is {given.url} Placement's endpoint itself? "
            "GET on it answers with the API's versions"
        )
    elif error.status == 404:
        hint = given.not_found or ""
    else:
        hint = HINTS.get(error.status, "see the service's log for the cause" if error.status >= 500 else "")
    message = f"{request} answered {error.status}{code}: {detail}"
    return ApiFailure(message + (f"\nhint: {hint}" if hint else ""))


_NO_SUCH_PATH = "The resource could not be found."
# The status's stock sentence that Placement's errors open with, before the detail that matters
# (a 404 for a path that does not exist says its stock sentence alone).
_STOCK = re.compile(
    r"^(The server could not comply with the request since it is either malformed or otherwise incorrect\."
    r"|The resource could not be found\.)\s*"
)
# A JSON schema refusal goes on with where in the schema it failed; the sentence before it says it all.
_SCHEMA_DUMP = re.compile(r"\s+Failed validating .*", re.DOTALL)


def _readable(detail: str) -> str:
    return " ".join(_SCHEMA_DUMP.sub("", _STOCK.sub("", detail)).split()) or " ".join(detail.split())


def _transport_reason(detail: str) -> str:
    for needle, reason in (
        ("Connection refused", "connection refused"),
        ("timed out", "no answer in time"),
        ("Name or service not known", "no such host name"),
        ("Could not resolve host", "no such host name"),
        ("nodename nor servname", "no such host name"),
        ("Temporary failure in name resolution", "no such host name"),
    ):
        if needle in detail:
            return reason
    return detail


def _check_scheme(url: str) -> None:
    """Refuse an endpoint without its scheme, which would otherwise read as a service that is down."""
    if urlsplit(url).scheme not in ("http", "https"):
        raise click.UsageError(f"the endpoint {url!r} (--url or $BERTH_URL) needs its scheme: http://{url}")


def connect(url: str | None, token: str | None, environ: Mapping[str, str]) -> PlacementClient:
    if url is not None:
        _check_scheme(url)
    if token is None and environ.get("OS_AUTH_URL"):
        session = _keystone_session(environ)
        if session is not None:
            token, url = _from_keystone(session, url, environ)
    # One attempt: a person at a terminal wants the error now, not after the retries of a daemon.
    # An operator, not a service: the token's roles alone (noauth2's admin: the admin role).
    return PlacementClient(url or DEFAULT_URL, token or DEFAULT_TOKEN, attempts=1, timeout=60.0, roles=())


def _keystone_session(environ: Mapping[str, str]) -> Any:
    try:
        from keystoneauth1 import loading, session
    except ImportError:
        click.echo(
            "note: $OS_AUTH_URL is set but keystoneauth1 is not installed (pip install 'berth[keystone]'); "
            f"sending the token {DEFAULT_TOKEN!r} instead",
            err=True,
        )
        return None
    loader: Any = loading.get_plugin_loader(environ.get("OS_AUTH_TYPE", "password"))
    options = {}
    for option in loader.get_options():
        name = "OS_" + option.dest.upper()
        if environ.get(name):
            options[option.dest] = environ[name]
    return session.Session(auth=loader.load_from_options(**options))


def _from_keystone(session: Any, url: str | None, environ: Mapping[str, str]) -> tuple[str, str | None]:
    from keystoneauth1 import exceptions

    try:
        token = str(session.get_token())
        if url is None:
            found = session.get_endpoint(
                service_type="placement",
                interface=environ.get("OS_INTERFACE", "public"),
                region_name=environ.get("OS_REGION_NAME"),
            )
            url = str(found) if found else None
    except exceptions.ClientException as error:
        raise ApiFailure(
            f"Keystone at {environ['OS_AUTH_URL']} did not authenticate: {error}\n"
            "hint: check OS_USERNAME, OS_PASSWORD, OS_PROJECT_NAME and the domain variables, or pass --token"
        ) from None
    return token, url


def placement_command(command: Callable[..., None]) -> Callable[..., None]:
    """Give a command the connection options and an ``Api`` as its first argument, and word its failures."""

    @functools.wraps(command)
    def run(*args: Any, url: str | None, token: str | None, output: str, **kwargs: Any) -> None:
        client = connect(url, token, os.environ)
        try:
            command(Api(client, output), *args, **kwargs)
        except PlacementError as error:
            raise explain_failure(error, client.url) from None

    options = [
        click.option(
            "--url",
            envvar="BERTH_URL",
            default=None,
            metavar="URL",
            help=f"the Placement endpoint (default: {DEFAULT_URL}, or Keystone's catalog; also $BERTH_URL)",
        ),
        click.option(
            "--token",
            envvar="BERTH_TOKEN",
            default=None,
            metavar="TOKEN",
            help=f"X-Auth-Token (default: {DEFAULT_TOKEN!r}, noauth2's admin, or a Keystone token when "
            "$OS_AUTH_URL is set; also $BERTH_TOKEN)",
        ),
        FORMAT_OPTION,
    ]
    decorated: Callable[..., None] = run
    for option in reversed(options):
        decorated = option(decorated)
    return decorated
