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
from sqlalchemy.dialects import sqlite

from berth.domain.host.records import ClaimRecord
from berth.sql.driver import DriverStatement
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


# The writes, each compiled once for SQLite and sent straight to the driver: a statement run through
# SQLAlchemy is compiled once per engine, and a pool of simulated hosts has an engine per host.
_INSERT = claims.insert()
_UPDATE = claims.update().where(claims.c.claim_id == sa.bindparam("which"))
_DELETE = claims.delete().where(claims.c.claim_id == sa.bindparam("which"))
_ALL = sa.select(claims)
_SQLITE = sqlite.dialect()
_WRITES = {
    name: DriverStatement(statement, _SQLITE)
    for name, statement in (("insert", _INSERT), ("update", _UPDATE), ("delete", _DELETE))
}


def _order(record: ClaimRecord) -> tuple[float, str]:
    return record.created_at, record.claim_id


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


def _record(row: sa.RowMapping) -> ClaimRecord:
    data = dict(row)
    body = orjson.loads(data.pop("body"))
    return ClaimRecord.from_dict({**data, **body})


class ClaimStore:
    """The claims of one host: every read answered from memory, every write committed to the file
    first. One agent owns a claim store (``berth agent`` locks it), so what it wrote is all there is;
    the copy in memory is read once, when the store opens, and changed only by a committed write."""

    def __init__(self, path: str):
        self.path = str(path)
        directory = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(directory, exist_ok=True)
        self.engine = sa.create_engine(f"sqlite:///{self.path}", connect_args={"timeout": 30})
        sa.event.listen(self.engine, "connect", _pragmas)
        # SQLite in Python serialises per connection; one writer at a time within the process too.
        self._write_lock = threading.Lock()
        try:
            metadata.create_all(self.engine)
            with self.engine.begin() as conn:
                version = conn.execute(sa.select(meta.c.value).where(meta.c.key == "schema_version")).scalar()
                if version is None:
                    conn.execute(meta.insert().values(key="schema_version", value=SCHEMA_VERSION))
                elif version != SCHEMA_VERSION:
                    raise StoreError(f"{self.path}: claim store schema {version}, this tracker knows {SCHEMA_VERSION}")
                found = [_record(row) for row in conn.execute(_ALL).mappings()]
        except sa.exc.DatabaseError as e:
            # A damaged file (truncated, overwritten): said with what to do, not as SQLite's traceback.
            self.engine.dispose()
            raise StoreError(
                f"the claim store {self.path} cannot be opened ({e.orig}); if the file is damaged, move it aside "
                "(with its -wal and -shm files, leaving the .agent_id and .guests.json files where they are) and "
                "start the agent again: its audit finds the guests the host runs and, healing, adopts what the "
                "service holds for them as claims"
            ) from None
        # Replaced whole by each write, never changed in place: a reader holds a consistent set.
        self._claims: dict[str, ClaimRecord] = {r.claim_id: r for r in sorted(found, key=_order)}

    def close(self) -> None:
        self.engine.dispose()

    # -- writes: one transaction each ---------------------------------------------------------

    def write(
        self, *, add: Iterable[ClaimRecord] = (), replace: Iterable[ClaimRecord] = (), delete: Iterable[str] = ()
    ) -> None:
        """Apply several changes in one transaction (all or none)."""
        with self._write_lock:
            claims = dict(self._claims)
            with self.engine.begin() as conn:
                for record in add:
                    _WRITES["insert"].rows(conn, _row(record))
                    claims[record.claim_id] = record
                for record in replace:
                    if record.claim_id not in claims:
                        raise StoreError(f"claim {record.claim_id} is not in the store")
                    _WRITES["update"].rows(conn, {**_row(record), "which": record.claim_id})
                    claims[record.claim_id] = record
                for claim_id in delete:
                    _WRITES["delete"].rows(conn, {"which": claim_id})
                    claims.pop(claim_id, None)
            self._claims = dict(sorted(claims.items(), key=lambda item: _order(item[1])))

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

    # -- reads: from memory, oldest claim first -----------------------------------------------

    def get(self, claim_id: str) -> ClaimRecord | None:
        return self._claims.get(claim_id)

    def all(self) -> list[ClaimRecord]:
        return list(self._claims.values())

    def for_instance(self, instance_uuid: str) -> list[ClaimRecord]:
        return [r for r in self._claims.values() if r.instance_uuid == instance_uuid]

    def for_host(self, host: str) -> list[ClaimRecord]:
        return [r for r in self._claims.values() if r.host == host]

    def for_migration(self, migration_uuid: str) -> list[ClaimRecord]:
        return [r for r in self._claims.values() if r.migration_uuid == migration_uuid]

    def pending(self) -> list[ClaimRecord]:
        return [r for r in self._claims.values() if r.pending_op is not None]

    def get_meta(self, key: str) -> str | None:
        with self.engine.connect() as conn:
            return conn.execute(sa.select(meta.c.value).where(meta.c.key == key)).scalar()


def _pragmas(dbapi_connection: Any, _record: object) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()
