"""The capacity rule: how much of an inventory may be allocated, and in which units.

Every place that decides whether an amount fits (the API's inventory checks, the allocation writes'
conditional UPDATE, the candidate search in memory and in SQL, the provider filters, the explain
counts, the compute tracker's own claims) takes the rule from here, in Python or as the SQL below,
so that a change to over-commit semantics is one edit in this module.

- Capacity: ``(total - reserved) * allocation_ratio``, rounded down to a whole unit.
- An amount fits when ``used + amount`` stays within the capacity.
- Unit constraints: each allocation is at least ``min_unit``, at most ``max_unit``, and a multiple
  of ``step_size``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# The largest value the reference accepts for integer inventory fields.
MAX_INT = 2147483647
# The largest allocation ratio it accepts (its column is a single-precision float): beyond it a
# capacity is infinite, which no count of units can be compared with.
MAX_ALLOCATION_RATIO = 3.40282e38

INVENTORY_DEFAULTS: dict[str, Any] = {
    "reserved": 0,
    "min_unit": 1,
    "max_unit": MAX_INT,
    "step_size": 1,
    "allocation_ratio": 1.0,
}
INVENTORY_FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")


def allocatable(total: int, reserved: int, allocation_ratio: float) -> float:
    """The rule itself: (total - reserved) x allocation_ratio, before rounding."""
    return (total - reserved) * allocation_ratio


def capacity(total: int, reserved: int, allocation_ratio: float) -> int:
    """How many units may be allocated in all: the rule rounded down to a whole unit."""
    return int(allocatable(total, reserved, allocation_ratio))


def headroom(total: int, reserved: int, allocation_ratio: float, used: int) -> float:
    """The units an inventory still has room for, before rounding (``headroom_sql`` in Python): an
    amount fits by room alone exactly when it is at most this."""
    return allocatable(total, reserved, allocation_ratio) - used


def fits_units(amount: int, min_unit: int, max_unit: int, step_size: int) -> bool:
    """Whether one allocation of ``amount`` meets the inventory's unit constraints."""
    return min_unit <= amount <= max_unit and amount % step_size == 0


# The same rules in SQL, over the columns of an ``inventories`` row called ``row``, with ``amount``
# an SQL expression (a placeholder or a column). Comparing the unrounded product with a whole number
# of units is the same test as comparing its rounded-down value.


def allocatable_sql(row: str | None = None) -> str:
    """SQL for ``allocatable``: the row's (total - reserved) x allocation_ratio, before rounding;
    ``row`` qualifies the columns."""
    prefix = f"{row}." if row else ""
    return f"({prefix}total - {prefix}reserved) * {prefix}allocation_ratio"


def room_sql(row: str, amount: str) -> str:
    """SQL that is true when the row has room for ``amount`` more units."""
    return f"{allocatable_sql(row)} >= {row}.used + {amount}"


def headroom_sql(row: str | None = None) -> str:
    """SQL for the units an inventory row still has room for, before rounding: an amount fits by
    room alone exactly when it is at most this (``room_sql`` moved to one side; both sides are whole
    numbers or a product of them, so the subtraction is exact). Indexed by class
    (``ix_inventories_headroom``), so that the providers with room for an amount are read as one
    range of the index; ``row`` qualifies the columns (SQLite and PostgreSQL both match a qualified
    expression to the index's unqualified one)."""
    return f"{allocatable_sql(row)} - {row + '.' if row else ''}used"


def units_sql(row: str, amount: str) -> str:
    """SQL that is true when ``amount`` meets the row's unit constraints (``amount`` appears three times)."""
    return f"{row}.min_unit <= {amount} AND {row}.max_unit >= {amount} AND {amount} % {row}.step_size = 0"


def units_of_all_sql(row: str, lowest: str, highest: str, divisor: str) -> str:
    """SQL that is true when each of several amounts meets the row's unit constraints, given their
    ``lowest``, ``highest`` and greatest common ``divisor`` (SQL expressions): a step divides every
    amount exactly when it divides their greatest common divisor."""
    return f"{row}.min_unit <= {lowest} AND {row}.max_unit >= {highest} AND {divisor} % {row}.step_size = 0"


@dataclass(slots=True)
class Inventory:
    """One provider's inventory of one resource class, as Placement defines its fields."""

    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int = MAX_INT
    step_size: int = 1
    allocation_ratio: float = 1.0

    @property
    def capacity(self) -> int:
        return capacity(self.total, self.reserved, self.allocation_ratio)

    def fits_unit_constraints(self, amount: int) -> bool:
        return fits_units(amount, self.min_unit, self.max_unit, self.step_size)

    def has_room(self, used: int, amount: int) -> bool:
        """Whether ``amount`` more units fit on top of ``used``."""
        return used + amount <= self.capacity

    def can_allocate(self, used: int, amount: int) -> bool:
        """Whether one allocation of ``amount`` is allowed on top of ``used``: units and room."""
        return self.fits_unit_constraints(amount) and self.has_room(used, amount)

    def as_dict(self) -> dict[str, Any]:
        """The inventory's fields as Placement's API writes them."""
        fields = asdict(self)
        fields["allocation_ratio"] = float(self.allocation_ratio)
        return fields

    def invalid_reason(self, reserved_can_be_total: bool) -> str | None:
        """Why Placement would refuse to store this inventory, or None: a capacity below 0, or (before
        microversion 1.26, ``reserved_can_be_total`` False) of 0. Placement judges the capacity, not
        reserved against total: an allocation ratio of 0 or below refuses it too, in the same words."""
        capacity = self.capacity
        if capacity < 0 or (capacity == 0 and not reserved_can_be_total):
            if reserved_can_be_total:
                return "The reserved value is greater than total."
            return "The reserved value is greater than or equal to total."
        return None

    def unallocatable_reason(self) -> str | None:
        """Why nothing could ever be allocated from this inventory, or None.

        Placement stores such an inventory; Berth refuses it (docs/compatibility.md), but only after
        the checks Placement makes, so that a client sees the same answer where Placement refuses too.
        """
        if self.min_unit > self.max_unit:
            return "The minimum unit is greater than the maximum unit."
        return None
