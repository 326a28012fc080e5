"""Count the projects whose limits were set before they had any consumer, under 0011

Migration 0012 counted the projects with limits that had a ``projects`` row, and a project gets one
with its first consumer; so a project given limits before it launched anything (the usual order)
was left out, and is counted nowhere since: its first limit was set already, and the counting
starts with the first limit (``berth.store.quotas.limits``). Its claims read its usage as sums,
which are right alone but take no lock on PostgreSQL, so two claims racing could both pass its
limit. This counts every project with limits that is not counted, from its sums, with the
``projects`` row it lacks created.

Revision ID: 0017
Revises: 0016
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_LIMITED_WITHOUT_ROW = """
INSERT INTO projects (external_id, created_at, updated_at)
SELECT q.project_id, q.created_at, q.updated_at FROM quota_projects q
WHERE NOT EXISTS (SELECT 1 FROM projects p WHERE p.external_id = q.project_id)"""

# The limited projects not counted, kept while they are counted below.
_NOT_COUNTED = """
CREATE TEMPORARY TABLE berth_uncounted AS
SELECT p.id AS project_pk FROM projects p JOIN quota_projects q ON q.project_id = p.external_id
WHERE NOT EXISTS (SELECT 1 FROM quota_counted_projects c WHERE c.project_pk = p.id)"""

_SUMS = """
INSERT INTO quota_usage (project_pk, user_pk, resource_class_id, used)
SELECT c.project_id, CASE s.own WHEN 0 THEN 0 ELSE c.user_id END AS scope, a.resource_class_id, SUM(a.used)
FROM consumers c
JOIN berth_uncounted n ON n.project_pk = c.project_id
JOIN allocations a ON a.consumer_id = c.uuid,
(SELECT 0 AS own UNION ALL SELECT 1) s
GROUP BY c.project_id, scope, a.resource_class_id
UNION ALL
SELECT c.project_id, CASE s.own WHEN 0 THEN 0 ELSE c.user_id END AS scope, 0, COUNT(*)
FROM consumers c
JOIN berth_uncounted n ON n.project_pk = c.project_id,
(SELECT 0 AS own UNION ALL SELECT 1) s
WHERE EXISTS (SELECT 1 FROM allocations a WHERE a.consumer_id = c.uuid)
GROUP BY c.project_id, scope"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        # As when a first limit is set (berth.store.quotas.usage.start_counting): the sums include
        # every committed write, and every later write sees the projects counted.
        op.execute("LOCK TABLE consumers, allocations IN SHARE MODE")
    op.execute(_LIMITED_WITHOUT_ROW)
    op.execute(_NOT_COUNTED)
    op.execute("DELETE FROM quota_usage WHERE project_pk IN (SELECT project_pk FROM berth_uncounted)")
    op.execute("INSERT INTO quota_counted_projects (project_pk) SELECT project_pk FROM berth_uncounted")
    op.execute(_SUMS)
    op.execute("DROP TABLE berth_uncounted")


def downgrade() -> None:
    # Counting more projects changed no schema; the counters of 0012 stay right for them.
    pass
