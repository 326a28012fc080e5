"""Allocations: the bodies of PUT /allocations/{consumer_uuid} and POST /allocations."""

from __future__ import annotations

from functools import cache
from typing import Any, Final

from berth.api import microversion as mv
from berth.api.microversion import Version
from berth.api.schemas.common import GENERATION, GROUP_SUFFIX_PATTERN, NAME_PATTERN, UUID, UUID_PATTERN
from berth.api.validation import JsonSchema
from berth.domain.capacity import MAX_INT

_AMOUNTS: Final[dict[str, Any]] = {
    "type": "object",
    "minProperties": 1,
    "patternProperties": {NAME_PATTERN: {"type": "integer", "minimum": 1, "maximum": MAX_INT}},
    "additionalProperties": False,
}
_EXTERNAL_ID: Final[dict[str, Any]] = {"type": "string", "minLength": 1, "maxLength": 255}
# Placement's pattern is not anchored: a key with any suffix character in it is checked, and one
# without (the unsuffixed group's "") is not.
_MAPPINGS: Final[dict[str, Any]] = {
    "type": "object",
    "minProperties": 1,
    "patternProperties": {GROUP_SUFFIX_PATTERN: {"type": "array", "minItems": 1, "items": UUID}},
}


@cache
def allocations_put_schema(version: Version) -> JsonSchema:
    """PUT /allocations/{consumer_uuid}: a list of allocations before 1.12, keyed by provider after."""
    if version < mv.ALLOCATIONS_BY_PROVIDER:
        return _allocation_list_schema(version)
    return _consumer_allocations_schema(version, allow_empty=version >= mv.CONSUMER_GENERATION)


@cache
def allocations_post_schema(version: Version) -> JsonSchema:
    """POST /allocations: several consumers at once (1.13)."""
    # The keys of each schema in the order of Placement's: a body with several faults is refused
    # for the first that jsonschema meets.
    return {
        "type": "object",
        "minProperties": 1,
        "additionalProperties": False,
        "patternProperties": {UUID_PATTERN: _consumer_allocations_schema(version, allow_empty=True)},
    }


def _allocation_list_schema(version: Version) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "allocations": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "resource_provider": {
                            "type": "object",
                            "properties": {"uuid": UUID},
                            "additionalProperties": False,
                            "required": ["uuid"],
                        },
                        "resources": _AMOUNTS,
                    },
                    "required": ["resource_provider", "resources"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["allocations"],
        "additionalProperties": False,
    }
    if version >= mv.ALLOCATION_OWNER:
        schema["properties"]["project_id"] = _EXTERNAL_ID
        schema["properties"]["user_id"] = _EXTERNAL_ID
        schema["required"] += ["project_id", "user_id"]
    return schema


def _consumer_allocations_schema(version: Version, *, allow_empty: bool) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "allocations": {
                "type": "object",
                "minProperties": 0 if allow_empty else 1,
                "patternProperties": {
                    UUID_PATTERN: {
                        "type": "object",
                        "properties": {"generation": GENERATION, "resources": _AMOUNTS},
                        "required": ["resources"],
                        "additionalProperties": False,
                    }
                },
                "additionalProperties": False,
            },
            "project_id": _EXTERNAL_ID,
            "user_id": _EXTERNAL_ID,
        },
        "additionalProperties": False,
        "required": ["allocations", "project_id", "user_id"],
    }
    if version >= mv.CONSUMER_GENERATION:
        schema["properties"]["consumer_generation"] = {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_INT}
        schema["required"].append("consumer_generation")
    if version >= mv.CANDIDATE_MAPPINGS:
        schema["properties"]["mappings"] = _MAPPINGS
    if version >= mv.CONSUMER_TYPES:
        schema["properties"]["consumer_type"] = {
            "type": "string",
            "pattern": NAME_PATTERN,
            "minLength": 1,
            "maxLength": 255,
        }
        schema["required"].append("consumer_type")
    return schema
