"""quota_counted_projects and quota_usage: what each project with limits, and each of its users,
holds, kept by triggers on allocations and consumers

A project is counted while it has a row in quota_counted_projects (berth.store.quotas.limits adds it,
with the sums, when the project's first limit is set, and removes it with the last). The counters are
then exactly ``SUM(allocations.used)`` over the consumers of the project (``user_pk`` 0) or of one of
its users, per resource class, and, under ``resource_class_id`` 0, how many of those consumers hold
allocations: the sum ``berth.store.quotas.usage`` counted on every claim before.

SQLite runs row triggers as each row changes; PostgreSQL runs the allocation triggers once per
statement over its transition tables, since its row triggers fire at the end of the statement, when
a consumer's other rows have changed too, and could not tell its first or last allocation.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_UPSERT = " ON CONFLICT (project_pk, user_pk, resource_class_id) DO UPDATE SET used = quota_usage.used + excluded.used"
# Both scopes of one consumer: the project's total (user_pk 0) and its user's.
_SCOPES = "(SELECT 0 AS own UNION ALL SELECT 1)"


def _shift(project: str, user: str, uuid: str, sign: str) -> str:
    """Add (sign 1) or take off (-1) everything the consumer ``uuid`` holds to or from the counters of
    ``project`` and ``user`` (row ids), when the project is counted."""
    return f"""
INSERT INTO quota_usage (project_pk, user_pk, resource_class_id, used)
SELECT {project}, CASE s.own WHEN 0 THEN 0 ELSE {user} END, held.rc, {sign} * held.used
FROM (SELECT resource_class_id AS rc, SUM(used) AS used FROM allocations WHERE consumer_id = {uuid}
      GROUP BY resource_class_id
      UNION ALL SELECT 0, 1 WHERE EXISTS (SELECT 1 FROM allocations WHERE consumer_id = {uuid})) held,
     {_SCOPES} s
WHERE EXISTS (SELECT 1 FROM quota_counted_projects WHERE project_pk = {project}){_UPSERT};"""


# --- SQLite: row triggers, each seeing the table as it is right after its row changed ---------------

# A cloud without limits has no counted project: one look at the empty table, before the consumer's.
_SQLITE_COUNTED = (
    "EXISTS (SELECT 1 FROM quota_counted_projects) AND "
    "EXISTS (SELECT 1 FROM consumers c JOIN quota_counted_projects q ON q.project_pk = c.project_id "
    "WHERE c.uuid = {row}.consumer_id)"
)


def _counted(row: str) -> str:
    """Whether the project of the consumer row ``row`` (NEW or OLD) is counted."""
    return f"EXISTS (SELECT 1 FROM quota_counted_projects WHERE project_pk = {row}.project_id)"


def _sqlite_allocation_delta(row: str, sign: str) -> str:
    """The change one allocation row makes: its amount, and one consumer more (less) when it is the
    consumer's first (last) allocation."""
    first_or_last = (
        f"(SELECT COUNT(*) FROM allocations WHERE consumer_id = {row}.consumer_id) = 1"
        if sign == "1"
        else f"NOT EXISTS (SELECT 1 FROM allocations WHERE consumer_id = {row}.consumer_id)"
    )
    return f"""
INSERT INTO quota_usage (project_pk, user_pk, resource_class_id, used)
SELECT c.project_id, CASE s.own WHEN 0 THEN 0 ELSE c.user_id END, d.rc, d.used
FROM consumers c,
     (SELECT {row}.resource_class_id AS rc, {sign} * {row}.used AS used
      UNION ALL SELECT 0, {sign} WHERE {first_or_last}) d,
     {_SCOPES} s
WHERE c.uuid = {row}.consumer_id{_UPSERT};"""


_SQLITE_TRIGGERS = {
    "quota_usage_allocation_inserted": f"""
CREATE TRIGGER quota_usage_allocation_inserted AFTER INSERT ON allocations
WHEN {_SQLITE_COUNTED.format(row="NEW")}
BEGIN{_sqlite_allocation_delta("NEW", "1")}
END""",
    "quota_usage_allocation_deleted": f"""
CREATE TRIGGER quota_usage_allocation_deleted AFTER DELETE ON allocations
WHEN {_SQLITE_COUNTED.format(row="OLD")}
BEGIN{_sqlite_allocation_delta("OLD", "-1")}
END""",
    # Nothing updates an allocation row in place today; should anything, it counts as the old row
    # deleted and the new one inserted.
    "quota_usage_allocation_updated": f"""
CREATE TRIGGER quota_usage_allocation_updated AFTER UPDATE OF consumer_id, resource_class_id, used ON allocations
WHEN EXISTS (SELECT 1 FROM quota_counted_projects)
BEGIN
INSERT INTO quota_usage (project_pk, user_pk, resource_class_id, used)
SELECT c.project_id, CASE s.own WHEN 0 THEN 0 ELSE c.user_id END, OLD.resource_class_id, -OLD.used
FROM consumers c JOIN quota_counted_projects q ON q.project_pk = c.project_id, {_SCOPES} s
WHERE c.uuid = OLD.consumer_id{_UPSERT};
INSERT INTO quota_usage (project_pk, user_pk, resource_class_id, used)
SELECT c.project_id, CASE s.own WHEN 0 THEN 0 ELSE c.user_id END, 0, -1
FROM consumers c JOIN quota_counted_projects q ON q.project_pk = c.project_id, {_SCOPES} s
WHERE c.uuid = OLD.consumer_id AND OLD.consumer_id <> NEW.consumer_id
  AND NOT EXISTS (SELECT 1 FROM allocations WHERE consumer_id = OLD.consumer_id){_UPSERT};
INSERT INTO quota_usage (project_pk, user_pk, resource_class_id, used)
SELECT c.project_id, CASE s.own WHEN 0 THEN 0 ELSE c.user_id END, NEW.resource_class_id, NEW.used
FROM consumers c JOIN quota_counted_projects q ON q.project_pk = c.project_id, {_SCOPES} s
WHERE c.uuid = NEW.consumer_id{_UPSERT};
INSERT INTO quota_usage (project_pk, user_pk, resource_class_id, used)
SELECT c.project_id, CASE s.own WHEN 0 THEN 0 ELSE c.user_id END, 0, 1
FROM consumers c JOIN quota_counted_projects q ON q.project_pk = c.project_id, {_SCOPES} s
WHERE c.uuid = NEW.consumer_id AND OLD.consumer_id <> NEW.consumer_id
  AND (SELECT COUNT(*) FROM allocations WHERE consumer_id = NEW.consumer_id) = 1{_UPSERT};
END""",
    "quota_usage_consumer_inserted": f"""
CREATE TRIGGER quota_usage_consumer_inserted AFTER INSERT ON consumers
WHEN {_counted("NEW")}
BEGIN{_shift("NEW.project_id", "NEW.user_id", "NEW.uuid", "1")}
END""",
    "quota_usage_consumer_deleted": f"""
CREATE TRIGGER quota_usage_consumer_deleted AFTER DELETE ON consumers
WHEN {_counted("OLD")}
BEGIN{_shift("OLD.project_id", "OLD.user_id", "OLD.uuid", "-1")}
END""",
    "quota_usage_consumer_moved": f"""
CREATE TRIGGER quota_usage_consumer_moved AFTER UPDATE OF project_id, user_id, uuid ON consumers
WHEN (OLD.project_id <> NEW.project_id OR OLD.user_id <> NEW.user_id OR OLD.uuid <> NEW.uuid)
  AND ({_counted("OLD")} OR {_counted("NEW")})
BEGIN{_shift("OLD.project_id", "OLD.user_id", "OLD.uuid", "-1")}
{_shift("NEW.project_id", "NEW.user_id", "NEW.uuid", "1")}
END""",
}

# --- PostgreSQL: the allocation triggers once per statement, the consumer triggers per row ---------

# What an allocation statement changed: ``changed`` (amounts, the deleted rows' negative, and rows:
# 1 inserted, -1 deleted) from the statement's transition tables, and from it ``net``, the rows each
# consumer gained; ``holders``: a consumer holding rows now and not before counts one more, and the
# other way round one less.
_INSERTED = "SELECT consumer_id, resource_class_id, used, 1 AS n FROM inserted"
_DELETED = "SELECT consumer_id, resource_class_id, -used AS used, -1 AS n FROM deleted"
_PG_ALLOCATION_BODY = """
WITH changed AS ({changed}),
counted AS (
    SELECT ch.*, c.project_id AS project_pk, c.user_id AS user_pk
    FROM changed ch
    JOIN consumers c ON c.uuid = ch.consumer_id
    JOIN quota_counted_projects q ON q.project_pk = c.project_id
),
net AS (
    SELECT consumer_id, project_pk, user_pk, SUM(n) AS n FROM counted GROUP BY consumer_id, project_pk, user_pk
),
holders AS (
    SELECT net.project_pk, net.user_pk, 0 AS rc,
           CASE WHEN now_held.n > 0 THEN 1 ELSE 0 END - CASE WHEN now_held.n - net.n > 0 THEN 1 ELSE 0 END AS used
    FROM net CROSS JOIN LATERAL (
        SELECT COUNT(*) AS n FROM allocations a WHERE a.consumer_id = net.consumer_id
    ) now_held
),
deltas AS (
    SELECT project_pk, user_pk, resource_class_id AS rc, used FROM counted
    UNION ALL SELECT project_pk, user_pk, rc, used FROM holders
)
INSERT INTO quota_usage (project_pk, user_pk, resource_class_id, used)
SELECT d.project_pk, CASE s.own WHEN 0 THEN 0 ELSE d.user_pk END AS scope, d.rc, SUM(d.used)
FROM deltas d, (SELECT 0 AS own UNION ALL SELECT 1) s
GROUP BY d.project_pk, scope, d.rc
HAVING SUM(d.used) <> 0
ORDER BY d.project_pk, scope, d.rc"""


def _pg_function(name: str, body: str) -> str:
    # Projects without limits cost one look at the (then empty) table of counted projects.
    return f"""
CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM quota_counted_projects) THEN
        RETURN NULL;
    END IF;
    {body};
    RETURN NULL;
END
$$"""


_PG_FUNCTIONS = {
    "quota_usage_allocations_inserted": _PG_ALLOCATION_BODY.format(changed=_INSERTED) + _UPSERT,
    "quota_usage_allocations_deleted": _PG_ALLOCATION_BODY.format(changed=_DELETED) + _UPSERT,
    "quota_usage_allocations_updated": (
        _PG_ALLOCATION_BODY.format(changed=f"{_INSERTED} UNION ALL {_DELETED}") + _UPSERT
    ),
    "quota_usage_consumer_inserted": _shift("NEW.project_id", "NEW.user_id", "NEW.uuid", "1").rstrip(";"),
    "quota_usage_consumer_deleted": _shift("OLD.project_id", "OLD.user_id", "OLD.uuid", "-1").rstrip(";"),
    "quota_usage_consumer_moved": _shift("OLD.project_id", "OLD.user_id", "OLD.uuid", "-1")
    + _shift("NEW.project_id", "NEW.user_id", "NEW.uuid", "1").rstrip(";"),
}

_PG_TRIGGERS = {
    "quota_usage_allocations_inserted": (
        "AFTER INSERT ON allocations REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT"
    ),
    "quota_usage_allocations_deleted": (
        "AFTER DELETE ON allocations REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT"
    ),
    "quota_usage_allocations_updated": (
        "AFTER UPDATE ON allocations REFERENCING OLD TABLE AS deleted NEW TABLE AS inserted FOR EACH STATEMENT"
    ),
    "quota_usage_consumer_inserted": "AFTER INSERT ON consumers FOR EACH ROW",
    "quota_usage_consumer_deleted": "AFTER DELETE ON consumers FOR EACH ROW",
    "quota_usage_consumer_moved": (
        "AFTER UPDATE ON consumers FOR EACH ROW WHEN (OLD.project_id <> NEW.project_id "
        "OR OLD.user_id <> NEW.user_id OR OLD.uuid <> NEW.uuid)"
    ),
}


def upgrade() -> None:
    op.create_table(
        "quota_counted_projects",
        sa.Column("project_pk", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("project_pk", name=op.f("pk_quota_counted_projects")),
    )
    op.create_table(
        "quota_usage",
        sa.Column("project_pk", sa.Integer(), nullable=False),
        sa.Column("user_pk", sa.Integer(), nullable=False),
        sa.Column("resource_class_id", sa.Integer(), nullable=False),
        sa.Column("used", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("project_pk", "user_pk", "resource_class_id", name=op.f("pk_quota_usage")),
    )
    if op.get_bind().dialect.name == "postgresql":
        for name, body in _PG_FUNCTIONS.items():
            op.execute(_pg_function(name, body))
            op.execute(f"CREATE TRIGGER {name} {_PG_TRIGGERS[name]} EXECUTE FUNCTION {name}()")
    else:
        for ddl in _SQLITE_TRIGGERS.values():
            op.execute(ddl)
    # Projects that have limits already are counted from now on, from their sums.
    op.execute(
        "INSERT INTO quota_counted_projects (project_pk) "
        "SELECT p.id FROM projects p JOIN quota_projects q ON q.project_id = p.external_id"
    )
    op.execute(
        """
INSERT INTO quota_usage (project_pk, user_pk, resource_class_id, used)
SELECT c.project_id, CASE s.own WHEN 0 THEN 0 ELSE c.user_id END AS scope, a.resource_class_id, SUM(a.used)
FROM consumers c
JOIN quota_counted_projects q ON q.project_pk = c.project_id
JOIN allocations a ON a.consumer_id = c.uuid,
(SELECT 0 AS own UNION ALL SELECT 1) s
GROUP BY c.project_id, scope, a.resource_class_id
UNION ALL
SELECT c.project_id, CASE s.own WHEN 0 THEN 0 ELSE c.user_id END AS scope, 0, COUNT(*)
FROM consumers c
JOIN quota_counted_projects q ON q.project_pk = c.project_id,
(SELECT 0 AS own UNION ALL SELECT 1) s
WHERE EXISTS (SELECT 1 FROM allocations a WHERE a.consumer_id = c.uuid)
GROUP BY c.project_id, scope"""
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for name in _PG_FUNCTIONS:
            op.execute(f"DROP TRIGGER {name} ON {'allocations' if 'allocations' in name else 'consumers'}")
            op.execute(f"DROP FUNCTION {name}()")
    else:
        for name in _SQLITE_TRIGGERS:
            op.execute(f"DROP TRIGGER {name}")
    op.drop_table("quota_usage")
    op.drop_table("quota_counted_projects")
