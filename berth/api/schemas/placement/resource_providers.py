"""Resource providers: the body of POST and PUT, and the query of GET /resource_providers."""

from __future__ import annotations

from functools import cache
from typing import Any

from berth.api import microversion as mv
from berth.api.microversion import Version
from berth.api.schemas.common import UUID
from berth.api.validation import JsonSchema


@cache
def provider_body_schema(version: Version, *, create: bool) -> JsonSchema:
    properties: dict[str, Any] = {"name": {"type": "string", "maxLength": 200}}
    if create:
        properties["uuid"] = UUID
    if version >= mv.NESTED_PROVIDERS:
        properties["parent_provider_uuid"] = {"anyOf": [UUID, {"type": "null"}]}
    return {"type": "object", "properties": properties, "required": ["name"], "additionalProperties": False}


@cache
def provider_list_query_schema(version: Version) -> JsonSchema:
    properties: dict[str, Any] = {"name": {"type": "string"}, "uuid": UUID}
    if version >= mv.PROVIDER_LIST_MEMBER_OF:
        properties["member_of"] = {"type": "string"}
    if version >= mv.PROVIDER_LIST_RESOURCES:
        properties["resources"] = {"type": "string"}
    if version >= mv.NESTED_PROVIDERS:
        properties["in_tree"] = UUID
    if version >= mv.PROVIDER_LIST_TRAITS:
        properties["required"] = {"type": "string"}
    return {"type": "object", "properties": properties, "additionalProperties": False}
