"""Aggregates: the body of PUT /resource_providers/{uuid}/aggregates."""

from __future__ import annotations

from functools import cache
from typing import Any, Final

from berth.api import microversion as mv
from berth.api.microversion import Version
from berth.api.schemas.common import GENERATION, UUID
from berth.api.validation import JsonSchema

AGGREGATE_LIST: Final[dict[str, Any]] = {"type": "array", "items": UUID, "uniqueItems": True}


@cache
def aggregates_put_schema(version: Version) -> JsonSchema:
    if version < mv.AGGREGATES_GENERATION:
        return AGGREGATE_LIST
    return {
        "type": "object",
        "properties": {"aggregates": AGGREGATE_LIST, "resource_provider_generation": GENERATION},
        "required": ["aggregates", "resource_provider_generation"],
        "additionalProperties": False,
    }
