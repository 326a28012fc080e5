"""The tracker's own books: every claim of one host, in a SQLite file of its own.

Each change is one transaction, committed with ``synchronous=FULL`` before the tracker answers, so a
claim the tracker reported is a claim a restarted tracker finds again, with its NUMA cells, pinned
CPUs, PCI devices and migration context.  The columns the tracker looks claims up by are columns;
the rest of a claim is one JSON document.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from typing import Any

import orjson
import sqlalchemy as sa

from berth.domain.host.records import ClaimRecord
from berth.tracker.errors import StoreError

__all__ = ["ClaimStore", "StoreError"]

SCHEMA_VERSION = "1"

metadata = sa.MetaData()

claims = sa.Table(
    "claims",
    metadata,
    sa.Column("claim_id", sa.String(36), primary_key=True),
    sa.Column("host", sa.String(255), nullable=False, index=True),
    sa.Column("instance_uuid", sa.String(36), nullable=False, index=True),
    sa.Column("consumer_uuid", sa.String(36), nullable=False),
    sa.Column("migration_uuid", sa.String(36), nullable=True, index=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("state", sa.String(32), nullable=False),
    sa.Column("pending_op", sa.String(32), nullable=True),
    sa.Column("project_id", sa.String(255), nullable=False),
    sa.Column("user_id", sa.String(255), nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("state_changed_at", sa.Float, nullable=False),
)

meta = sa.Table(
    "meta",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)


# Each statement built once, its values bound at each call: a statement built anew for every write
# (``.values(...)``, a fresh ``where``) had SQLAlchemy work out its cache key each time, which was
# the largest part of an agent's CPU in a write.
_INSERT = claims.insert()
_UPDATE = claims.update().where(claims.c.claim_id == sa.bindparam("which"))
_DELETE = claims.delete().where(claims.c.claim_id == sa.bindparam("which"))
_ORDER = (claims.c.created_at, claims.c.claim_id)
_ALL = sa.select(claims).order_by(*_ORDER)
_BY = {
    column: sa.select(claims).where(claims.c[column] == sa.bindparam("value")).order_by(*_ORDER)
    for column in ("claim_id", "instance_uuid", "host", "migration_uuid")
}
_PENDING = sa.select(claims).where(claims.c.pending_op.is_not(None)).order_by(*_ORDER)


def _row(record: ClaimRecord) -> dict[str, Any]:
    return {
        "claim_id": record.claim_id,
        "host": record.host,
        "instance_uuid": record.instance_uuid,
        "consumer_uuid": record.consumer_uuid,
        "migration_uuid": record.migration_uuid,
        "kind": record.kind,
        "state": record.state,
        "pending_op": record.pending_op,
        "project_id": record.project_id,
        "user_id": record.user_id,
        "body": orjson.dumps(record.body()).decode(),
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "state_changed_at": record.state_changed_at,
    }


def _record(row: sa.Row[Any]) -> ClaimRecord:
    data = dict(row._mapping)
    body = orjson.loads(data.pop("body"))
    return ClaimRecord.from_dict({**data, **body})


class ClaimStore:
    def __init__(self, path: str):
        self.path = str(path)
        directory = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(directory, exist_ok=True)
        self.engine = sa.create_engine(f"sqlite:///{self.path}", connect_args={"timeout": 30})
        sa.event.listen(self.engine, "connect", _pragmas)
        # SQLite in Python serialises per connection; one writer at a time within the process too.
        self._write_lock = threading.Lock()
        metadata.create_all(self.engine)
        with self.engine.begin() as conn:
            version = conn.execute(sa.select(meta.c.value).where(meta.c.key == "schema_version")).scalar()
            if version is None:
                conn.execute(meta.insert().values(key="schema_version", value=SCHEMA_VERSION))
            elif version != SCHEMA_VERSION:
                raise StoreError(f"{self.path}: claim store schema {version}, this tracker knows {SCHEMA_VERSION}")

    def close(self) -> None:
        self.engine.dispose()

    # -- writes: one transaction each ---------------------------------------------------------

    def write(
        self, *, add: Iterable[ClaimRecord] = (), replace: Iterable[ClaimRecord] = (), delete: Iterable[str] = ()
    ) -> None:
        """Apply several changes in one transaction (all or none)."""
        with self._write_lock, self.engine.begin() as conn:
            for record in add:
                conn.execute(_INSERT, _row(record))
            for record in replace:
                result = conn.execute(_UPDATE, {**_row(record), "which": record.claim_id})
                if result.rowcount != 1:
                    raise StoreError(f"claim {record.claim_id} is not in the store")
            for claim_id in delete:
                conn.execute(_DELETE, {"which": claim_id})

    def add(self, record: ClaimRecord) -> ClaimRecord:
        self.write(add=[record])
        return record

    def update(self, record: ClaimRecord, **changes: Any) -> ClaimRecord:
        new = record.evolve(**changes)
        self.write(replace=[new])
        return new

    def delete(self, claim_id: str) -> None:
        self.write(delete=[claim_id])

    def set_meta(self, key: str, value: str) -> None:
        with self._write_lock, self.engine.begin() as conn:
            conn.execute(meta.delete().where(meta.c.key == key))
            conn.execute(meta.insert().values(key=key, value=value))

    # -- reads --------------------------------------------------------------------------------

    def _select(self, statement: sa.Select[Any], params: dict[str, Any] | None = None) -> list[ClaimRecord]:
        with self.engine.connect() as conn:
            return [_record(row) for row in conn.execute(statement, params)]

    def get(self, claim_id: str) -> ClaimRecord | None:
        found = self._select(_BY["claim_id"], {"value": claim_id})
        return found[0] if found else None

    def all(self) -> list[ClaimRecord]:
        return self._select(_ALL)

    def for_instance(self, instance_uuid: str) -> list[ClaimRecord]:
        return self._select(_BY["instance_uuid"], {"value": instance_uuid})

    def for_host(self, host: str) -> list[ClaimRecord]:
        return self._select(_BY["host"], {"value": host})

    def for_migration(self, migration_uuid: str) -> list[ClaimRecord]:
        return self._select(_BY["migration_uuid"], {"value": migration_uuid})

    def pending(self) -> list[ClaimRecord]:
        return self._select(_PENDING)

    def get_meta(self, key: str) -> str | None:
        with self.engine.connect() as conn:
            return conn.execute(sa.select(meta.c.value).where(meta.c.key == key)).scalar()


def _pragmas(dbapi_connection: Any, _record: object) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()
