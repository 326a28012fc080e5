"""PostgreSQL's allocation triggers pass by the consumers the transaction counts itself

A pick knows what it writes (one new consumer), and counts it with one statement that also checks
its quotas (``berth.store.quotas.own_count``), where the triggers' general statement over the
write's transition tables cost it about 0.16 ms of server time and the check a round trip more.
Such a write names its consumers, comma-separated, in the transaction-local setting
``berth.counted_by_writer`` before its first allocation; the triggers then leave their rows alone.
Every other write sets nothing and is counted as before. SQLite's triggers are unchanged: its picks
are checked as before.

``berth_quota_exceeded`` refuses the transaction from inside a statement (SQLSTATE BQ001, the limit
passed as JSON in the message), so that a pick can send its count, its check and its COMMIT in one
round trip: the COMMIT is never reached when a limit is passed.

Revision ID: 0014
Revises: 0013
"""

from types import ModuleType

from alembic import op

from berth.store.migrate import earlier_migration

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_NAMES = ("quota_usage_allocations_inserted", "quota_usage_allocations_deleted", "quota_usage_allocations_updated")
# The rows a statement changed, less those of the consumers the transaction counts itself (none when
# the setting was never set, NULL, or was set by an earlier transaction of the session, '').
_COUNTED_BY_WRITER = "string_to_array(COALESCE(current_setting('berth.counted_by_writer', true), ''), ',')"
_NOT_COUNTED_BY_WRITER = "SELECT * FROM ({changed}) rows WHERE rows.consumer_id <> ALL (" + _COUNTED_BY_WRITER + ")"
# A statement that changed only such rows (a pick's allocations) returns at once: the counting
# statement, even over no rows, costs its executor's start and end (about 0.05 ms).
_ONLY_COUNTED_BY_WRITER = """IF COALESCE(current_setting('berth.counted_by_writer', true), '') <> ''
        AND NOT EXISTS ({tables}) THEN
        RETURN NULL;
    END IF;
    """
_TABLES = {
    "quota_usage_allocations_inserted": ("inserted",),
    "quota_usage_allocations_deleted": ("deleted",),
    "quota_usage_allocations_updated": ("inserted", "deleted"),
}


_EXCEEDED = """
CREATE FUNCTION berth_quota_exceeded(user_id text, resource text, hard_limit bigint, used bigint)
RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'BQ001', MESSAGE = json_build_object(
        'user_id', user_id, 'resource', resource, 'limit', hard_limit, 'used', used)::text;
END
$$"""


def _counters_0012() -> ModuleType:
    """Migration 0012, whose allocation trigger functions these are."""
    return earlier_migration("0012_quota_usage_counters.py")


def _functions(passing_by: bool) -> list[str]:
    counters = _counters_0012()
    changed = {
        "quota_usage_allocations_inserted": counters._INSERTED,
        "quota_usage_allocations_deleted": counters._DELETED,
        "quota_usage_allocations_updated": f"{counters._INSERTED} UNION ALL {counters._DELETED}",
    }
    functions = []
    for name in _NAMES:
        rows = _NOT_COUNTED_BY_WRITER.format(changed=changed[name]) if passing_by else changed[name]
        body = counters._PG_ALLOCATION_BODY.format(changed=rows) + counters._UPSERT
        if passing_by:
            others = " UNION ALL ".join(
                f"SELECT 1 FROM {table} WHERE consumer_id <> ALL ({_COUNTED_BY_WRITER})" for table in _TABLES[name]
            )
            body = _ONLY_COUNTED_BY_WRITER.format(tables=others) + body
        functions.append(counters._pg_function(name, body).replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))
    return functions


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for function in _functions(passing_by=True):
            op.execute(function)
        op.execute(_EXCEEDED)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for function in _functions(passing_by=False):
            op.execute(function)
        op.execute("DROP FUNCTION berth_quota_exceeded(text, text, bigint, bigint)")
