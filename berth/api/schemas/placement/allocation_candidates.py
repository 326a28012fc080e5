"""The query of GET /allocation_candidates."""

from __future__ import annotations

from functools import cache
from typing import Any

from berth.api import microversion as mv
from berth.api.microversion import Version
from berth.api.schemas.common import GROUP_SUFFIX_PATTERN
from berth.api.validation import JsonSchema

# Keys that name a request group, with its suffix after them.
GROUP_KEYS = ("resources", "required", "member_of", "in_tree")


@cache
def allocation_candidates_query_schema(version: Version) -> JsonSchema:
    """Plain keys, and the request-group keys with their suffixes."""
    properties: dict[str, Any] = {"resources": {"type": "string"}}
    if version >= mv.CANDIDATE_LIMIT:
        # Placement's schema, word for word: a 400 quotes it.
        properties["limit"] = {"type": ["integer", "string"], "pattern": "^[1-9][0-9]*$", "minimum": 1, "minLength": 1}
    # Types and the order of keys as in Placement's schema: a 400 quotes it, and a query with several
    # faults is refused for the first that jsonschema meets ("resources" missing before a key unknown).
    if version >= mv.CANDIDATE_TRAITS:
        properties["required"] = {"type": ["string"]}
    if version >= mv.CANDIDATE_MEMBER_OF:
        properties["member_of"] = {"type": ["string"]}
    if version < mv.REQUEST_GROUPS:
        return {"type": "object", "properties": properties, "required": ["resources"], "additionalProperties": False}
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    properties["group_policy"] = {"type": "string", "enum": ["none", "isolate"]}
    if version >= mv.ROOT_REQUIRED:
        properties["root_required"] = {"type": ["string"]}
    if version >= mv.SAME_SUBTREE:
        properties["same_subtree"] = {"type": ["string"]}
    schema["patternProperties"] = _group_keys(version)
    for key in GROUP_KEYS:
        properties.pop(key, None)
    return schema


def _group_keys(version: Version) -> dict[str, Any]:
    """The request-group keys, each with any suffix the version allows."""
    suffix = GROUP_SUFFIX_PATTERN if version >= mv.STRING_SUFFIXES else "[1-9][0-9]*"
    keys = GROUP_KEYS if version >= mv.CANDIDATE_IN_TREE else GROUP_KEYS[:3]
    return {f"^{key}({suffix})?$": {"type": "string"} for key in keys}
