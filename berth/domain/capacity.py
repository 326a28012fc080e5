"""Capacity arithmetic shared by inventory updates, allocation checks and candidate search."""

from __future__ import annotations

from dataclasses import dataclass

# The largest value the reference accepts for integer inventory fields.
MAX_INT = 2147483647

INVENTORY_DEFAULTS = {
    "reserved": 0,
    "min_unit": 1,
    "max_unit": MAX_INT,
    "step_size": 1,
    "allocation_ratio": 1.0,
}
INVENTORY_FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")


def capacity(total: int, reserved: int, allocation_ratio: float) -> int:
    """How many units may be allocated in all: (total - reserved) x allocation_ratio."""
    return int((total - reserved) * allocation_ratio)


@dataclass(frozen=True)
class Inventory:
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
        return self.min_unit <= amount <= self.max_unit and amount % self.step_size == 0

    def invalid_reason(self, reserved_can_be_total: bool) -> str | None:
        """Why this inventory cannot be stored, or None."""
        if self.reserved > self.total or (self.reserved == self.total and not reserved_can_be_total):
            if reserved_can_be_total:
                return "The reserved value is greater than total."
            return "The reserved value is greater than or equal to total."
        if self.min_unit > self.max_unit:
            return "The minimum unit is greater than the maximum unit."
        return None
