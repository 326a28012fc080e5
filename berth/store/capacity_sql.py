"""The domain's capacity rule as SQLAlchemy clauses over the ``inventories`` table.

The statements sent as plain SQL text (``berth.store.rawsql``) embed ``room_sql`` and ``units_sql``
directly; the Core statements take these clauses. The amount is a whole number validated by the API,
written into the SQL as a literal: these statements are not on the hottest paths.
"""

from __future__ import annotations

import sqlalchemy as sa

from berth.domain.capacity import allocatable_sql, room_sql, units_sql
from berth.store.schema import inventories

_ROW = inventories.name


def allocatable(table: sa.TableClause | sa.Alias = inventories) -> sa.ColumnElement[float]:
    """The row's (total - reserved) x allocation_ratio before rounding, of ``table`` (the
    ``inventories`` table or an alias of it)."""
    return sa.literal_column(allocatable_sql(table.name), sa.Float())


def has_room(amount: int) -> sa.TextClause:
    """The inventory row has room for ``amount`` more units."""
    return sa.text(room_sql(_ROW, str(int(amount))))


def fits_units(amount: int) -> sa.TextClause:
    """``amount`` meets the inventory row's unit constraints."""
    return sa.text(f"({units_sql(_ROW, str(int(amount)))})")
