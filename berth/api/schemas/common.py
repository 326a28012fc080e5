"""Patterns and pieces the schemas of several nouns share."""

from __future__ import annotations

from typing import Any, Final

from berth.domain.capacity import MAX_ALLOCATION_RATIO, MAX_INT

UUID_PATTERN: Final = "^[0-9a-fA-F-]{36}$"
NAME_PATTERN: Final = "^[A-Z0-9_]+$"
CUSTOM_NAME_PATTERN: Final = "^CUSTOM_[A-Z0-9_]+$"
GROUP_SUFFIX_PATTERN: Final = "[a-zA-Z0-9_-]{1,64}"
FLOAT_MAX: Final = MAX_ALLOCATION_RATIO

UUID: Final[dict[str, Any]] = {"type": "string", "format": "uuid"}
GENERATION: Final[dict[str, Any]] = {"type": "integer", "minimum": 0, "maximum": MAX_INT}


def whole_number(minimum: int) -> dict[str, Any]:
    """An integer from ``minimum`` to the largest an inventory can hold (the keys in the order of
    Placement's inventory schema, which a 400 quotes)."""
    return {"type": "integer", "maximum": MAX_INT, "minimum": minimum}
