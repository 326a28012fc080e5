"""PostgreSQL's triggers on inserted consumers and allocations not called for a write that counts
its consumer itself

A pick names its consumer in ``berth.counted_by_writer`` (migration 0014) and counts what it holds
itself once its allocations are written. Its consumer's row and its allocations were still given to
the triggers' functions, which looked at the counted projects, and then at the consumer's
allocations (it has none yet) or at the statement's rows (all the pick's), before returning: four
statements of PL/pgSQL per pick of a counted project. The triggers' ``WHEN`` now pass them by before
the functions are called:
- a consumer row, when it is one named;
- an allocation insert, whenever the setting names any consumer: its writer inserts allocations for
  the consumers it names alone (``berth.store.quotas.own_count``). Removals and updates are counted
  whoever writes them (a pick's victims).

Revision ID: 0015
Revises: 0014
"""

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

_SETTING = "COALESCE(current_setting('berth.counted_by_writer', true), '')"
_CONSUMER = "quota_usage_consumer_inserted"
_ALLOCATIONS = "quota_usage_allocations_inserted"
_EVENTS = {
    _CONSUMER: ("consumers", "AFTER INSERT ON consumers FOR EACH ROW"),
    _ALLOCATIONS: (
        "allocations",
        "AFTER INSERT ON allocations REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT",
    ),
}
_WHEN = {
    _CONSUMER: f" WHEN (NOT (NEW.uuid = ANY (string_to_array({_SETTING}, ','))))",
    _ALLOCATIONS: f" WHEN ({_SETTING} = '')",
}


def _trigger(name: str, when: str) -> list[str]:
    table, event = _EVENTS[name]
    return [f"DROP TRIGGER {name} ON {table}", f"CREATE TRIGGER {name} {event}{when} EXECUTE FUNCTION {name}()"]


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for name, when in _WHEN.items():
            for statement in _trigger(name, when):
                op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for name in _WHEN:
            for statement in _trigger(name, ""):
                op.execute(statement)
