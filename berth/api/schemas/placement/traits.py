"""Traits: a provider's traits, and the query of GET /traits."""

from __future__ import annotations

from typing import Any, Final

from berth.api.schemas.common import GENERATION, NAME_PATTERN

# PUT /resource_providers/{uuid}/traits
PROVIDER_TRAITS_PUT: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "traits": {"type": "array", "items": {"type": "string", "pattern": NAME_PATTERN}, "uniqueItems": True},
        "resource_provider_generation": GENERATION,
    },
    "required": ["traits", "resource_provider_generation"],
    "additionalProperties": False,
}

TRAITS_LIST_QUERY: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "associated": {"type": "string"}},
    "additionalProperties": False,
}
