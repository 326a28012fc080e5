"""Claim leases: allocations the service releases itself unless they are confirmed in time.

A lease names a consumer and a moment.  Until the lease is confirmed (dropped, the allocations kept)
the consumer's allocations are released, as ``DELETE /allocations/{consumer}`` releases them, once
that moment has passed: a scheduler or conductor that dies between claiming and building leaks
nothing.  A lease may be taken before the consumer holds anything, so that a crash between taking
it and writing the allocations leaks nothing either.

Lock order: a lease row, then the consumer, then inventories (what ``store.allocations`` takes).
Whoever writes a lease and allocations in one transaction should set the lease first, so that
it queues behind a reaper instead of deadlocking with it.

Several reapers (one per worker process) may run at once.  On PostgreSQL each takes the expired
leases it will release with ``FOR UPDATE SKIP LOCKED``: a lease another reaper holds is skipped,
and one it has already deleted is no longer found, so each lease is released exactly once and no
reaper waits for another.  On SQLite writers run one at a time, and the second finds nothing left.

Time is the database's: on PostgreSQL a lease's moment is computed, and compared, by the statement
that writes or reaps it, from the server's ``statement_timestamp()``.  Servers whose clocks disagree
would otherwise end leases early (a reaper whose clock runs ahead) or late (a server whose clock lags
setting them).  A SQLite file is written by the processes of one machine, whose clock is the one
Python reads.
"""

from __future__ import annotations

import datetime
import enum
import math
from dataclasses import dataclass
from typing import Final

import sqlalchemy as sa
from sqlalchemy import Connection

from berth.domain.errors import BadRequest, ConcurrentUpdate
from berth.store.placement.allocations import delete_consumer_allocations
from berth.store.schema import allocation_leases as leases
from berth.store.util import utcnow

# A lease covers the time between a claim and the build it is for: a day is far beyond any build,
# and a bound keeps the moment within what the databases store.
MAX_LEASE_SECONDS: Final = 86400.0
# Tries at releasing a consumer that a concurrent writer changed meanwhile (PostgreSQL only: SQLite
# runs one writer at a time); each try reads the consumer as that writer left it.
_RELEASE_TRIES: Final = 5


@dataclass(frozen=True)
class Lease:
    consumer_uuid: str
    # Naive UTC, as every timestamp of the store.
    expires_at: datetime.datetime
    created_at: datetime.datetime
    updated_at: datetime.datetime


def _lease(row: sa.Row[tuple[str, datetime.datetime, datetime.datetime, datetime.datetime]]) -> Lease:
    return Lease(row.consumer_uuid, row.expires_at, row.created_at, row.updated_at)


_COLUMNS: Final = (leases.c.consumer_uuid, leases.c.expires_at, leases.c.created_at, leases.c.updated_at)


_POSTGRESQL_NOW: Final = sa.func.timezone("UTC", sa.func.statement_timestamp(), type_=sa.DateTime)


def clock(conn: Connection) -> sa.ColumnElement[datetime.datetime]:
    """The database's time now (naive UTC) as a SQL expression; on SQLite this process's."""
    if conn.dialect.name == "postgresql":
        return _POSTGRESQL_NOW
    return sa.literal(utcnow(), sa.DateTime)


def database_now(conn: Connection) -> datetime.datetime:
    """The database's time now (naive UTC): what leases are measured against."""
    if conn.dialect.name == "postgresql":
        moment: datetime.datetime = conn.execute(sa.select(clock(conn))).scalar_one()
        return moment
    return utcnow()


def set_lease(conn: Connection, consumer_uuid: str, seconds: float) -> datetime.datetime:
    """Make the consumer's lease expire ``seconds`` from now, creating it if there is none; when."""
    if not (isinstance(seconds, int | float) and math.isfinite(seconds) and 0 <= seconds <= MAX_LEASE_SECONDS):
        raise BadRequest(f"A lease lasts from 0 to {MAX_LEASE_SECONDS:g} seconds, not {seconds!r}.")
    if conn.dialect.name == "postgresql":
        statement, parameters = _SET_ON_POSTGRESQL, {"consumer_uuid": consumer_uuid, "seconds": seconds}
    else:
        moment = utcnow()
        statement = _SET_ON_SQLITE
        parameters = {
            "consumer_uuid": consumer_uuid,
            "now": moment,
            "expires_at": moment + datetime.timedelta(seconds=seconds),
        }
    written: datetime.datetime = conn.execute(statement, parameters).scalar_one()
    return written


# The lease written whether or not there was one (its creation time kept), as one statement. As
# text: SQLAlchemy gives the dialects' INSERT ... ON CONFLICT no cache key, so that construct was
# compiled again for every lease a build takes. Every build takes one and confirms it.
_UPSERT: Final = """
INSERT INTO allocation_leases (consumer_uuid, expires_at, created_at, updated_at)
VALUES (:consumer_uuid, {expires_at}, {now}, {now})
ON CONFLICT (consumer_uuid) DO UPDATE SET expires_at = excluded.expires_at, updated_at = excluded.updated_at
RETURNING expires_at
"""
_SET_ON_POSTGRESQL: Final = (
    sa.text(
        _UPSERT.format(
            now="timezone('UTC', statement_timestamp())",
            expires_at="timezone('UTC', statement_timestamp()) + make_interval(secs => :seconds)",
        )
    )
    .bindparams(sa.bindparam("seconds", type_=sa.Float))
    .columns(expires_at=sa.DateTime)
)
_SET_ON_SQLITE: Final = (
    sa.text(_UPSERT.format(now=":now", expires_at=":expires_at"))
    .bindparams(sa.bindparam("now", type_=sa.DateTime), sa.bindparam("expires_at", type_=sa.DateTime))
    .columns(expires_at=sa.DateTime)
)
_EXPIRY_LOCKED: Final = (
    sa.select(leases.c.expires_at).where(leases.c.consumer_uuid == sa.bindparam("consumer_uuid")).with_for_update()
)
_DROP: Final = sa.delete(leases).where(leases.c.consumer_uuid == sa.bindparam("consumer_uuid"))


def get_lease(conn: Connection, consumer_uuid: str) -> Lease | None:
    row = conn.execute(sa.select(*_COLUMNS).where(leases.c.consumer_uuid == consumer_uuid)).one_or_none()
    return None if row is None else _lease(row)


def list_leases(conn: Connection) -> list[Lease]:
    """Every lease, the soonest to expire first."""
    rows = conn.execute(sa.select(*_COLUMNS).order_by(leases.c.expires_at, leases.c.consumer_uuid))
    return [_lease(row) for row in rows]


def _drop(conn: Connection, consumer_uuid: str) -> bool:
    return conn.execute(_DROP, {"consumer_uuid": consumer_uuid}).rowcount == 1


class Held(enum.Enum):
    """What a consumer's lease was when a confirmation or an extension came."""

    # No lease: never leased, confirmed already, or released (by a client or by the reaper).
    NONE = "none"
    # A lease that had not expired: the confirmation or the extension took effect.
    LIVE = "live"
    # A lease that had expired: it was released (allocations deleted, lease dropped) instead.
    EXPIRED = "expired"


def _expired_release(conn: Connection, consumer_uuid: str, now: datetime.datetime | None) -> Held:
    """Lock the consumer's lease; when it has expired by ``now`` (default: the database's now, as the
    reaper measures it; the reaper's rule: ``expires_at <= now``), release it as the reaper would, so
    that the answer does not depend on whether the reaper has passed yet.

    On PostgreSQL the row lock orders this against a reaper: one that holds the lease makes this
    wait and then find it gone (NONE); one that comes later skips it."""
    expires_at = conn.execute(_EXPIRY_LOCKED, {"consumer_uuid": consumer_uuid}).scalar_one_or_none()
    if expires_at is None:
        return Held.NONE
    if expires_at > (now or database_now(conn)):
        return Held.LIVE
    release_lease(conn, consumer_uuid)
    return Held.EXPIRED


def confirm_lease(conn: Connection, consumer_uuid: str, now: datetime.datetime | None = None) -> Held:
    """Drop the consumer's lease and keep its allocations for good (LIVE). A lease that has expired
    is released instead (EXPIRED): what the service has promised to free must not be kept by a
    confirmation that came late. NONE: there was no lease."""
    held = _expired_release(conn, consumer_uuid, now)
    if held is Held.LIVE:
        _drop(conn, consumer_uuid)
    return held


def extend_lease(conn: Connection, consumer_uuid: str, seconds: float, now: datetime.datetime | None = None) -> Held:
    """``set_lease`` for a client: the lease created (NONE) or moved (LIVE), unless it has expired,
    when it is released instead (EXPIRED) and no lease is left."""
    held = _expired_release(conn, consumer_uuid, now)
    if held is not Held.EXPIRED:
        set_lease(conn, consumer_uuid, seconds)
    return held


def drop_leases(conn: Connection, consumer_uuids: list[str]) -> None:
    """Drop the leases of consumers whose allocations the caller is about to delete itself (a
    preemption's victims), before it locks them: the lock order above."""
    conn.execute(sa.delete(leases).where(leases.c.consumer_uuid.in_(sorted(consumer_uuids))))


def release_lease(conn: Connection, consumer_uuid: str) -> bool:
    """Release the allocations of a leased consumer and drop its lease; False when it had no lease.

    A consumer without a lease is left alone: its allocations were confirmed (or never leased), and
    a late or repeated release must not free what a running workload holds.
    """
    if not _drop(conn, consumer_uuid):
        return False
    _release_allocations(conn, consumer_uuid)
    return True


def _release_allocations(conn: Connection, consumer_uuid: str) -> None:
    for attempt in range(1, _RELEASE_TRIES + 1):
        try:
            delete_consumer_allocations(conn, consumer_uuid)
            return
        except ConcurrentUpdate:
            # Refused before anything was written: the transaction is sound, and the next try reads
            # the consumer as the other writer committed it.
            if attempt == _RELEASE_TRIES:
                raise


def has_expired_leases(conn: Connection, now: datetime.datetime | None = None) -> bool:
    """Whether any lease has expired by ``now`` (default: the database's now): a read, so that a pass
    with nothing to release takes no write lock."""
    moment = clock(conn) if now is None else now
    return conn.execute(sa.select(sa.literal(1)).where(leases.c.expires_at <= moment).limit(1)).first() is not None


def reap_expired(conn: Connection, now: datetime.datetime | None = None, *, limit: int | None = None) -> list[str]:
    """Release every lease expired by ``now`` (naive UTC; default: the database's now), or the
    ``limit`` that expired first; the consumers released, in the order released (by uuid, the order
    in which consumers are locked)."""
    moment = clock(conn) if now is None else now
    query = (
        sa.select(leases.c.consumer_uuid)
        .where(leases.c.expires_at <= moment)
        .order_by(leases.c.expires_at, leases.c.consumer_uuid)
        .limit(limit)
        # Nothing on SQLite, whose writers take turns.
        .with_for_update(skip_locked=True)
    )
    expired = sorted(conn.execute(query).scalars())
    if not expired:
        return []
    conn.execute(sa.delete(leases).where(leases.c.consumer_uuid.in_(expired)))
    for consumer_uuid in expired:
        _release_allocations(conn, consumer_uuid)
    return expired
