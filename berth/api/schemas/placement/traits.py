"""Traits: a provider's traits, and the query of GET /traits."""

from __future__ import annotations

from typing import Any, Final

from berth.api.schemas.common import GENERATION

# PUT /resource_providers/{uuid}/traits
PROVIDER_TRAITS_PUT: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        # As Placement's: any name of 1 to 255 characters, each repeated at will (an unknown one is
        # refused by name, not by the schema).
        "traits": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 255}},
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
