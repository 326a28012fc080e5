"""berth_count_own: a pick's count of its own consumer and check of its quotas, as one function
(PostgreSQL)

The statement that counts a pick's consumer and checks its quotas went with the COMMIT in psycopg's
pipeline mode (migration 0014): sent as text in one simple query it was planned on every run, and
cost about 0.5 ms. Held in a PL/pgSQL function, whose statements are planned once per session, it
goes as ``SELECT berth_count_own('…'); COMMIT`` in one simple query, which costs the client less
than the pipeline's protocol. It refuses a limit passed itself (``berth_quota_exceeded``), so that
the COMMIT after it is never run; it answers whether the consumer's project is counted.

Revision ID: 0016
Revises: 0015
"""

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

# The consumer's owners when its project is counted; what it holds (and, under class 0, that it
# holds something), to the project's counters (user 0) and its user's, in key order like every
# other writer of them; then the first limit those counters now pass, the project's first, by user
# and resource bytewise (as the general check orders them).
_COUNT_OWN = """
CREATE FUNCTION berth_count_own(consumer_uuid text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    counted boolean;
    passed_user text;
    passed_resource text;
    passed_limit bigint;
    passed_used bigint;
BEGIN
    WITH owner AS (
        SELECT c.project_id AS project_pk, c.user_id AS user_pk
        FROM consumers c JOIN quota_counted_projects q ON q.project_pk = c.project_id
        WHERE c.uuid = consumer_uuid
    ),
    held AS (
        SELECT a.resource_class_id AS rc, SUM(a.used) AS used FROM allocations a
        WHERE a.consumer_id = consumer_uuid GROUP BY a.resource_class_id
        UNION ALL SELECT 0, 1 WHERE EXISTS (SELECT 1 FROM allocations a WHERE a.consumer_id = consumer_uuid)
    ),
    moved AS (
        INSERT INTO quota_usage (project_pk, user_pk, resource_class_id, used)
        SELECT o.project_pk, s.scope, h.rc, h.used
        FROM owner o CROSS JOIN LATERAL (VALUES (0), (o.user_pk)) s (scope) CROSS JOIN held h
        ORDER BY 1, 2, 3
        ON CONFLICT (project_pk, user_pk, resource_class_id)
            DO UPDATE SET used = quota_usage.used + excluded.used
        RETURNING quota_usage.project_pk, quota_usage.user_pk, quota_usage.resource_class_id, quota_usage.used
    ),
    passed AS (
        SELECT l.user_id, l.resource, l.hard_limit, m.used
        FROM moved m
        JOIN projects p ON p.id = m.project_pk
        LEFT JOIN users u ON u.id = m.user_pk
        LEFT JOIN resource_classes rc ON rc.id = m.resource_class_id
        JOIN quota_limits l ON l.project_id = p.external_id
            AND l.user_id = CASE WHEN m.user_pk = 0 THEN '' ELSE u.external_id END
            AND l.resource = CASE WHEN m.resource_class_id = 0 THEN 'consumers' ELSE rc.name END
        WHERE m.used > l.hard_limit
        ORDER BY l.user_id COLLATE "C", l.resource COLLATE "C"
        LIMIT 1
    )
    SELECT EXISTS (SELECT 1 FROM owner), p.user_id, p.resource, p.hard_limit, p.used
    INTO counted, passed_user, passed_resource, passed_limit, passed_used
    FROM (SELECT 1) one LEFT JOIN passed p ON true;
    IF passed_resource IS NOT NULL THEN
        PERFORM berth_quota_exceeded(passed_user, passed_resource, passed_limit, passed_used);
    END IF;
    RETURN counted;
END
$$"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_COUNT_OWN)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION berth_count_own(text)")
