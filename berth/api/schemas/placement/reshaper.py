"""The body of POST /reshaper (1.30): a tree's inventories and the allocations against them."""

from __future__ import annotations

from functools import cache

from berth.api.microversion import Version
from berth.api.schemas.common import UUID_PATTERN
from berth.api.schemas.placement.allocations import allocations_post_schema
from berth.api.schemas.placement.inventories import INVENTORIES_PUT
from berth.api.validation import JsonSchema


@cache
def reshaper_schema(version: Version) -> JsonSchema:
    # A copy: allocations_post_schema's answer is cached and shared with POST /allocations.
    allocations = {**allocations_post_schema(version), "minProperties": 0}
    return {
        "type": "object",
        "properties": {
            "inventories": {
                "type": "object",
                "minProperties": 1,
                "patternProperties": {UUID_PATTERN: INVENTORIES_PUT},
                "additionalProperties": False,
            },
            "allocations": allocations,
        },
        "required": ["inventories", "allocations"],
        "additionalProperties": False,
    }
