"""``berth lease list|release``: claim leases, Berth's extension (docs/leases.md)."""

from __future__ import annotations

from collections.abc import Iterable

import click
from rich.console import RenderableType

from berth.cli.client.connection import Api, placement_command, segment
from berth.cli.client.output import emit, note, table
from berth.cli.client.providers import is_uuid
from berth.clients.errors import PlacementError


@click.group("lease", help="Claim leases: allocations released unless confirmed in time.")
def lease_group() -> None:
    pass


@lease_group.command("list", help="List the leases, the soonest to expire first.")
@placement_command
def lease_list(api: Api) -> None:
    body = api.get("/berth/leases")

    def render() -> Iterable[RenderableType]:
        rows = [(lease["consumer_uuid"], lease["expires_at"], f"{lease['expires_in']:.1f}") for lease in body["leases"]]
        if not rows:
            yield note("no leases")
            return
        yield table(f"{len(rows)} leases", ("consumer", "expires at", "seconds left"), rows, numeric=1)

    emit(api.output, body, render)


@lease_group.command(
    "release",
    help="Release a consumer's lease and its allocations now; a consumer without a lease is left as it is.",
)
@click.argument("consumer")
@placement_command
def lease_release(api: Api, consumer: str) -> None:
    if not is_uuid(consumer):
        # An empty one would name the list of leases, which a release cannot act on (a bare 405).
        raise click.BadParameter(f"{consumer!r} is not a uuid: a lease is a consumer's", param_hint="'CONSUMER'")
    # The service answers 204 whether or not there was a lease to release (a release acts only on a
    # leased consumer, docs/leases.md), so only the lease read first tells what the release did.
    try:
        api.get(f"/berth/leases/{segment(consumer)}")
    except PlacementError as error:
        if error.status != 404:
            raise
        said = (
            f"{consumer} had no lease; nothing released (its allocations, if any, stay: "
            f"DELETE /allocations/{consumer} removes them)"
        )
        emit(api.output, {"consumer_uuid": consumer, "released": None}, lambda: [note(said)])
        return
    api.request("DELETE", f"/berth/leases/{segment(consumer)}")
    emit(
        api.output,
        {"consumer_uuid": consumer, "released": consumer},
        lambda: [note(f"released the lease and allocations of {consumer}")],
    )
