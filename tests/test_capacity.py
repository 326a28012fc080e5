"""The capacity rule says the same in Python and in the SQL every store query is built from."""

from __future__ import annotations

import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from berth.domain.capacity import MAX_INT, Inventory, headroom_sql, room_sql, units_sql

_ROW = (
    "SELECT CAST(:total AS BIGINT) AS total, CAST(:reserved AS BIGINT) AS reserved, "
    "CAST(:ratio AS FLOAT) AS allocation_ratio, CAST(:used AS BIGINT) AS used, "
    "CAST(:min_unit AS BIGINT) AS min_unit, CAST(:max_unit AS BIGINT) AS max_unit, "
    "CAST(:step AS BIGINT) AS step_size"
)
_RULES = (
    f"SELECT CASE WHEN {room_sql('inventories', 'CAST(:amount AS BIGINT)')} THEN 1 ELSE 0 END, "
    f"CASE WHEN {units_sql('inventories', 'CAST(:amount AS BIGINT)')} THEN 1 ELSE 0 END, "
    f"CASE WHEN {headroom_sql('inventories')} >= CAST(:amount AS BIGINT) THEN 1 ELSE 0 END "
    f"FROM ({_ROW}) AS inventories"
)

inventories = st.builds(
    Inventory,
    total=st.integers(1, 10_000),
    reserved=st.integers(0, 100),
    min_unit=st.integers(1, 8),
    max_unit=st.integers(1, MAX_INT),
    step_size=st.integers(1, 8),
    allocation_ratio=st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.7, 16.0]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(inventory=inventories, used=st.integers(0, 20_000), offset=st.integers(-2, 2), data=st.data())
def test_sql_and_python_agree(db, inventory, used, offset, data):
    # Amounts around the edge, where a wrong comparison or rounding shows, and some anywhere.
    edge = max(1, inventory.capacity - used + offset)
    amount = data.draw(st.sampled_from([edge, edge, data.draw(st.integers(1, 20_000))]))
    with db.engine.connect() as conn:
        room, units, within_headroom = conn.execute(
            sa.text(_RULES),
            {
                "total": inventory.total,
                "reserved": inventory.reserved,
                "ratio": inventory.allocation_ratio,
                "used": used,
                "min_unit": inventory.min_unit,
                "max_unit": inventory.max_unit,
                "step": inventory.step_size,
                "amount": amount,
            },
        ).one()
    assert bool(room) == inventory.has_room(used, amount)
    # The indexed form of the same test, which the search reads the providers with room through.
    assert bool(within_headroom) == bool(room)
    assert bool(units) == inventory.fits_unit_constraints(amount)
    assert inventory.can_allocate(used, amount) == (bool(room) and bool(units))


def test_capacity_rounds_down_and_counts_reserved():
    inventory = Inventory(total=10, reserved=3, allocation_ratio=1.5)
    assert inventory.capacity == 10  # (10 - 3) * 1.5 = 10.5
    assert inventory.has_room(used=9, amount=1)
    assert not inventory.has_room(used=10, amount=1)


def test_unit_constraints():
    inventory = Inventory(total=64, min_unit=2, max_unit=16, step_size=2)
    assert inventory.fits_unit_constraints(2) and inventory.fits_unit_constraints(16)
    assert not inventory.fits_unit_constraints(1)  # below the minimum
    assert not inventory.fits_unit_constraints(3)  # not a step
    assert not inventory.fits_unit_constraints(18)  # above the maximum
