"""Whether the database can serve requests: it answers, and its schema is at the newest revision."""

from __future__ import annotations

from functools import cache

import sqlalchemy as sa
from alembic.script import ScriptDirectory

from berth.store.database import Database
from berth.store.migrate import alembic_config


@cache
def newest_revisions() -> frozenset[str]:
    """The heads of the migrations this code ships (read once: they cannot change while it runs)."""
    return frozenset(ScriptDirectory.from_config(alembic_config()).get_heads())


def unready_reason(db: Database) -> str | None:
    """Why the database cannot serve requests, or None when it can.

    One connection and one statement, without the retries of a unit of work: a probe wants the
    state now, and asks again soon.
    """
    try:
        with db.engine.connect() as conn:
            current = _current_revisions(conn)
    except Exception as error:  # noqa: BLE001 - whatever the driver raises, the answer is "not ready"
        return f"the database does not answer: {type(error).__name__}: {str(error).splitlines()[0]}"
    newest = newest_revisions()
    if current != newest:
        have = ", ".join(sorted(current)) or "none"
        wanted = ", ".join(sorted(newest))
        return f"the database schema is at revision {have}, not the newest ({wanted}): run berth db upgrade"
    return None


def _current_revisions(conn: sa.Connection) -> frozenset[str]:
    """The revisions Alembic recorded (read directly: its migration context logs each time it starts)."""
    if not sa.inspect(conn).has_table("alembic_version"):
        return frozenset()
    return frozenset(conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars())
