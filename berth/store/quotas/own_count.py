"""A pick's new consumer counted by the pick itself, and its quotas checked in the same statement
(PostgreSQL).

The allocation triggers count any write in one general statement over its transition tables
(migration 0012); on PostgreSQL that statement cost a pick about 0.16 ms of server time, and the
quota check after it one round trip more (``berth.store.quotas.enforcement``). A pick knows what it
writes: one new consumer. It names that consumer in the transaction-local setting the triggers read
(``count_own``, before its first allocation; migrations 0014 and 0015), so that they leave its rows
alone (while it is set, the write inserts allocations for that consumer alone: the insert trigger
is then not called at all; its victims' removals are counted by the triggers), and
once the consumer is written adds what it holds to its project's and its user's counters in one
upsert (``count_and_check``). The counters the upsert moved come back from it locked, as the
triggers' updates would have left them, and the same statement joins them to the project's limits:
the rows it returns are the limits the write went past. A project that is not counted (it has no
limits: ``berth.store.quotas.usage``) is neither written nor checked.

Where the pick is its transaction's last work (the API's), the same work goes with the COMMIT, in
one simple query (``berth.store.write_edges.commit_with``), as a call of the function
``berth_count_own`` (migration 0016), whose statement PostgreSQL plans once per session: the counters
are then held for the server's time alone, and a limit passed is refused by the function itself
(``berth_quota_exceeded``, migration 0014), so that the COMMIT is never run. The setting goes with the write's BEGIN
(``berth.store.pick.quota_check.settings_for_pick``).

Only a pick for a project it believes counted does so: for the others (most, in a cloud without
quotas) the setting and the upsert's statement would cost more than the triggers' early return and
the general check, which finds no limits. The belief is each process's memory of what the last
pick of the project in the database found (``believed_counted``, ``remember``). Both ways are
right whatever the project's state: a pick that counts its own consumer counts it only for a
counted project, and one that does not leaves it to the triggers, which count it when the project
is counted.

The rule is the general check's: a write is refused for a resource only when it raises that
resource's usage, so what the pick's victims of the same project and user held is weighed against
what it asked (their removal is counted by the triggers, as any other write), and so is what the
instance a move's pick places again holds, which is also left out of the usage the write is judged
by (it stays counted until the move lands).
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError

from berth.store.quotas.enforcement import exceeded
from berth.store.quotas.limits import CONSUMERS, PROJECT_WIDE
from berth.store.rawsql import execute, fetch
from berth.store.write_edges import FinalStatement, commit_with, commits_with_statement, note_local_setting

SETTING = "berth.counted_by_writer"

# Per database (its engine: a URL's hash is worked out anew each time) and project, whether the
# last pick of it in this process found it counted; forgotten wholesale when a database's grows past
# _MOST_REMEMBERED (a miss costs one pick the slower way).
_COUNTED: weakref.WeakKeyDictionary[Engine, dict[str, bool]] = weakref.WeakKeyDictionary()
_MOST_REMEMBERED = 10_000

_COUNT_OWN = f"SELECT set_config('{SETTING}', ?, true)"

# The consumer's owners when its project is counted; what it holds (and, under class 0, that it
# holds something), to the project's counters (user 0) and its user's, in key order like every other
# writer of them; a row of NULLs when the project is counted, then the limits those counters now pass
# (the project's first, then by user and resource, as the general check orders them). The same work
# is berth_count_own's (migration 0016), which a pick sends with its COMMIT.
_COUNT_AND_CHECK = f"""
WITH owner AS (
    SELECT c.project_id AS project_pk, c.user_id AS user_pk
    FROM consumers c JOIN quota_counted_projects q ON q.project_pk = c.project_id
    WHERE c.uuid = ?
),
held AS (
    SELECT resource_class_id AS rc, SUM(used) AS used FROM allocations WHERE consumer_id = ?
    GROUP BY resource_class_id
    UNION ALL SELECT 0, 1 WHERE EXISTS (SELECT 1 FROM allocations WHERE consumer_id = ?)
),
moved AS (
    INSERT INTO quota_usage (project_pk, user_pk, resource_class_id, used)
    SELECT o.project_pk, s.scope, h.rc, h.used
    FROM owner o CROSS JOIN LATERAL (VALUES (0), (o.user_pk)) s (scope) CROSS JOIN held h
    ORDER BY 1, 2, 3
    ON CONFLICT (project_pk, user_pk, resource_class_id) DO UPDATE SET used = quota_usage.used + excluded.used
    RETURNING project_pk, user_pk, resource_class_id, used
)
SELECT NULL, NULL, NULL, NULL FROM owner
UNION ALL
SELECT passed.* FROM (
    SELECT l.user_id, l.resource, l.hard_limit, m.used
    FROM moved m
    JOIN projects p ON p.id = m.project_pk
    LEFT JOIN users u ON u.id = m.user_pk
    LEFT JOIN resource_classes rc ON rc.id = m.resource_class_id
    JOIN quota_limits l ON l.project_id = p.external_id
        AND l.user_id = CASE WHEN m.user_pk = 0 THEN '{PROJECT_WIDE}' ELSE u.external_id END
        AND l.resource = CASE WHEN m.resource_class_id = 0 THEN '{CONSUMERS}' ELSE rc.name END
    WHERE m.used > l.hard_limit
    ORDER BY l.user_id COLLATE "C", l.resource COLLATE "C"
) passed"""
_REFUSED = "BQ001"  # berth_quota_exceeded's SQLSTATE (migration 0014)


def believed_counted(engine: Engine, project_id: str) -> bool:
    """Whether the last pick of the project in this process found it counted."""
    return _COUNTED.get(engine, {}).get(project_id, False)


def remember(engine: Engine, project_id: str, counted: bool) -> None:
    known = _COUNTED.setdefault(engine, {})
    if len(known) >= _MOST_REMEMBERED:
        known.clear()
    known[project_id] = counted


def count_own(conn: Connection, consumer_uuid: str) -> None:
    """Before the consumer's first allocation: the triggers leave its rows to ``count_and_check``."""
    execute(conn, _COUNT_OWN, (consumer_uuid,))
    note_local_setting(SETTING, consumer_uuid)


def count_and_check(
    conn: Connection,
    consumer_uuid: str,
    project_id: str,
    user_id: str,
    asked: Mapping[str, int],
    freed: Mapping[str | None, Mapping[str, int]] | None = None,
    kept: Mapping[str | None, Mapping[str, int]] | None = None,
    *,
    commit: bool = False,
) -> None:
    """Count the consumer (written whole, new, announced by ``count_own``) and refuse (409
    ``berth.quota.exceeded``) the write when it took its project, or its user, over a limit on a
    resource it raised. ``asked``: what it was given, by resource (``consumers`` 1); ``freed``: what
    the write's victims of the same project held, by user (None: the project's), by resource;
    ``kept``: the same of the instance a move's pick places again. ``commit``: this is the write's
    last statement, which may then be sent with its COMMIT."""
    freed, kept = freed or {}, kept or {}
    if commit and not freed and not kept and commits_with_statement(conn):
        _count_and_check_with_the_commit(conn, consumer_uuid, project_id, asked)
        return
    rows = fetch(conn, _COUNT_AND_CHECK, (consumer_uuid,) * 3)
    remember(conn.engine, project_id, bool(rows))
    # The rows are the limits the counters now pass; the instance moved still counts in them.
    for limit_user, resource, limit, after in (row for row in rows if row[0] is not None):
        user = None if limit_user == PROJECT_WIDE else limit_user
        holding = freed.get(user, {}).get(resource, 0)
        keeping = kept.get(user, {}).get(resource, 0)
        wanted = asked.get(resource, 0)
        if wanted > holding + keeping and int(after) - keeping > int(limit):
            raise exceeded(
                project_id, user, resource, int(limit), int(after) - wanted + holding, wanted, holding, keeping
            )


def _count_and_check_with_the_commit(
    conn: Connection, consumer_uuid: str, project_id: str, asked: Mapping[str, int]
) -> None:
    """The count and check sent with the COMMIT, as a call of ``berth_count_own`` (migration 0016:
    the same work, planned once per session): the counters are held for the server's time alone,
    where a thread of a busy worker could otherwise wait milliseconds for its turn to send the
    COMMIT while every other claim of the project waits for the counters. Nothing the pick asked is
    held by a victim, so every limit its counters pass is a refusal, raised by the function."""
    from psycopg.sql import quote

    def refusal(error: DBAPIError) -> Exception | None:
        if getattr(error.orig, "sqlstate", None) != _REFUSED:
            return None
        passed = json.loads(error.orig.diag.message_primary)  # type: ignore[union-attr]
        user = None if passed["user_id"] == PROJECT_WIDE else passed["user_id"]
        wanted = asked.get(passed["resource"], 0)
        return exceeded(project_id, user, passed["resource"], passed["limit"], passed["used"] - wanted, wanted, 0)

    commit_with(
        conn,
        FinalStatement(
            f"SELECT berth_count_own({quote(consumer_uuid)})",
            on_rows=lambda rows: remember(conn.engine, project_id, bool(rows and rows[0][0])),
            refusal=refusal,
        ),
    )
