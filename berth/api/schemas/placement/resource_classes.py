"""Resource classes: the body naming a custom class."""

from __future__ import annotations

from typing import Any, Final

from berth.api.schemas.common import CUSTOM_NAME_PATTERN

# POST /resource_classes, PUT /resource_classes/{name} before 1.7, and the path's name from 1.7.
RESOURCE_CLASS_BODY: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"name": {"type": "string", "pattern": CUSTOM_NAME_PATTERN, "maxLength": 255}},
    "required": ["name"],
    "additionalProperties": False,
}
