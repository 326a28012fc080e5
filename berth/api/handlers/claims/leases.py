"""/berth/leases and /berth/leases/{consumer_uuid}: claim leases (berth.store.leases.ledger)."""

from __future__ import annotations

import datetime
from typing import Any

from sqlalchemy import Connection

from berth.api.call import Call
from berth.api.responses import json_response
from berth.api.schemas.claims.leases import LEASE_PUT
from berth.api.validation import is_uuid, normalize_uuid
from berth.domain import error_codes
from berth.domain.errors import BadRequest, Conflict, NotFound
from berth.store.leases import ledger
from berth.store.leases.ledger import Held, Lease
from berth.store.placement import allocations
from berth.store.util import latest
from berth.web.responses import Reply, empty_response


def _consumer(value: str) -> str:
    if not is_uuid(value):
        raise BadRequest(f"Malformed consumer_uuid: {value}")
    return normalize_uuid(value)


def _timestamp(moment: datetime.datetime) -> str:
    return moment.isoformat(timespec="microseconds") + "Z"


def _view(lease: Lease, now: datetime.datetime) -> dict[str, Any]:
    return {
        "consumer_uuid": lease.consumer_uuid,
        "expires_at": _timestamp(lease.expires_at),
        # The same moment as seconds left, for a client whose clock is not the service's.
        "expires_in": round(max(0.0, (lease.expires_at - now).total_seconds()), 3),
        "created_at": _timestamp(lease.created_at),
        "updated_at": _timestamp(lease.updated_at),
    }


def list_leases(call: Call) -> Reply:
    rows, now = call.db.read(lambda conn: (ledger.list_leases(conn), ledger.database_now(conn)))
    return json_response(
        call, {"leases": [_view(lease, now) for lease in rows]}, last_modified=latest(*(r.updated_at for r in rows))
    )


def show_lease(call: Call, consumer_uuid: str) -> Reply:
    consumer_uuid = _consumer(consumer_uuid)
    lease, now = call.db.read(lambda conn: (ledger.get_lease(conn, consumer_uuid), ledger.database_now(conn)))
    if lease is None:
        raise NotFound(f"No lease for consumer {consumer_uuid}.")
    return json_response(call, _view(lease, now), last_modified=lease.updated_at)


def _expired(consumer_uuid: str, what: str) -> Conflict:
    return Conflict(
        f"The lease of consumer {consumer_uuid} had expired when {what}: its allocations were "
        "released and the lease dropped.",
        code=error_codes.LEASE_EXPIRED,
    )


def set_lease(call: Call, consumer_uuid: str) -> Reply:
    consumer_uuid = _consumer(consumer_uuid)
    body = call.json_body(LEASE_PUT)

    def work(conn: Connection) -> tuple[Lease | None, datetime.datetime]:
        if ledger.extend_lease(conn, consumer_uuid, body["expires_in"]) is Held.EXPIRED:
            return None, ledger.database_now(conn)
        return ledger.get_lease(conn, consumer_uuid), ledger.database_now(conn)

    # The release of an expired lease is committed before the refusal is answered.
    lease, now = call.db.write(work)
    if lease is None:
        raise _expired(consumer_uuid, "extended")
    return json_response(call, _view(lease, now), last_modified=lease.updated_at)


def confirm_lease(call: Call, consumer_uuid: str) -> Reply:
    consumer_uuid = _consumer(consumer_uuid)

    def work(conn: Connection) -> Held | bool:
        held = ledger.confirm_lease(conn, consumer_uuid)
        if held is not Held.NONE:
            return held
        # Confirmed before (or never leased), the allocations stand: confirming again changes
        # nothing.  Nothing held means the lease expired and was released, which the caller must
        # learn rather than build on resources it no longer holds.
        return bool(allocations.allocations_of_consumer(conn, consumer_uuid))

    # The release of an expired lease is committed before the refusal is answered.
    outcome = call.db.write(work)
    if outcome is Held.EXPIRED:
        raise _expired(consumer_uuid, "confirmed")
    if outcome is False:
        raise NotFound(
            f"No lease and no allocations for consumer {consumer_uuid}: the lease expired and its "
            "allocations were released, or there never was one."
        )
    return empty_response()


def release_lease(call: Call, consumer_uuid: str) -> Reply:
    consumer_uuid = _consumer(consumer_uuid)
    call.db.write(lambda conn: ledger.release_lease(conn, consumer_uuid))
    return empty_response()
