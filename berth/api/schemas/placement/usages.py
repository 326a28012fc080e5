"""Usages: the query of GET /usages."""

from __future__ import annotations

from functools import cache
from typing import Any

from berth.api import microversion as mv
from berth.api.microversion import Version
from berth.api.schemas.common import NAME_PATTERN
from berth.api.validation import JsonSchema


@cache
def usages_query_schema(version: Version) -> JsonSchema:
    properties: dict[str, Any] = {
        "project_id": {"type": "string", "minLength": 1, "maxLength": 255},
        "user_id": {"type": "string", "minLength": 1, "maxLength": 255},
    }
    if version >= mv.CONSUMER_TYPES:
        # Placement's pattern, word for word: a 400 quotes it, and "all" is not anchored at its end,
        # so a type such as "allx" is asked for (and found on no consumer) rather than refused.
        properties["consumer_type"] = {
            "type": "string",
            "pattern": f"{NAME_PATTERN}|^all|^unknown$",
            "minLength": 1,
            "maxLength": 255,
        }
    return {"type": "object", "properties": properties, "required": ["project_id"], "additionalProperties": False}
