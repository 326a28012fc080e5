"""Whether the database can serve requests: it answers, and its schema is at the newest revision."""

from __future__ import annotations

from berth.store.database import Database
from berth.store.migrate import newer_schema, newest_revisions, recorded_revisions


def unready_reason(db: Database) -> str | None:
    """Why the database cannot serve requests, or None when it can.

    One connection and one statement, without the retries of a unit of work: a probe wants the
    state now, and asks again soon.
    """
    try:
        with db.engine.connect() as conn:
            current = recorded_revisions(conn)
    except Exception as error:  # noqa: BLE001 - whatever the driver raises, the answer is "not ready"
        return f"the database does not answer: {type(error).__name__}: {str(error).splitlines()[0]}"
    # A later release's schema: berth db upgrade would fail the same way, so it is not the advice.
    too_new = newer_schema(current)
    if too_new is not None:
        return too_new
    newest = newest_revisions()
    if current != newest:
        have = ", ".join(sorted(current)) or "none"
        wanted = ", ".join(sorted(newest))
        return f"the database schema is at revision {have}, not the newest ({wanted}): run berth db upgrade"
    return None
