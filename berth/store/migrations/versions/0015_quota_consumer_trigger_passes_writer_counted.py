"""PostgreSQL's trigger on inserted consumers not called for a consumer its writer counts itself

A pick names its consumer in ``berth.counted_by_writer`` (migration 0014) and counts what it holds
itself once its allocations are written. Its consumer's row was still given to the row trigger's
function, which looked at the counted projects and at the consumer's allocations (it has none yet)
before returning: two statements of PL/pgSQL per pick of a counted project. The trigger's ``WHEN``
now passes such a consumer by before the function is called; every other insert is counted as before.

Revision ID: 0015
Revises: 0014
"""

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

_NAME = "quota_usage_consumer_inserted"
_COUNTED_BY_WRITER = "string_to_array(COALESCE(current_setting('berth.counted_by_writer', true), ''), ',')"


def _trigger(when: str) -> list[str]:
    return [
        f"DROP TRIGGER {_NAME} ON consumers",
        f"CREATE TRIGGER {_NAME} AFTER INSERT ON consumers FOR EACH ROW{when} EXECUTE FUNCTION {_NAME}()",
    ]


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in _trigger(f" WHEN (NOT (NEW.uuid = ANY ({_COUNTED_BY_WRITER})))"):
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in _trigger(""):
            op.execute(statement)
