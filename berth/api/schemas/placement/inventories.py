"""Inventories: one inventory's record, and the bodies that write one or all of a provider's."""

from __future__ import annotations

from typing import Any, Final

from berth.api.schemas.common import FLOAT_MAX, GENERATION, NAME_PATTERN, whole_number

_RECORD_PROPERTIES: Final[dict[str, Any]] = {
    "total": whole_number(1),
    "reserved": whole_number(0),
    "min_unit": whole_number(1),
    "max_unit": whole_number(1),
    "step_size": whole_number(1),
    "allocation_ratio": {"type": "number", "maximum": FLOAT_MAX},
}

# Each record of PUT .../inventories (and POST /reshaper): as in Placement, a record may repeat the
# provider's generation (which only the body's own counts), as GET .../inventories/{class} shows it.
INVENTORY_RECORD: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"resource_provider_generation": GENERATION, **_RECORD_PROPERTIES},
    "required": ["total"],
    "additionalProperties": False,
}

# PUT /resource_providers/{uuid}/inventories/{resource_class}
INVENTORY_PUT_ONE: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {**_RECORD_PROPERTIES, "resource_provider_generation": GENERATION},
    "required": ["total", "resource_provider_generation"],
    "additionalProperties": False,
}

# POST /resource_providers/{uuid}/inventories
INVENTORY_POST: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        **_RECORD_PROPERTIES,
        "resource_provider_generation": GENERATION,
        "resource_class": {"type": "string", "pattern": NAME_PATTERN},
    },
    "required": ["total", "resource_class"],
    "additionalProperties": False,
}

# PUT /resource_providers/{uuid}/inventories
INVENTORIES_PUT: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "resource_provider_generation": GENERATION,
        "inventories": {
            "type": "object",
            "patternProperties": {NAME_PATTERN: INVENTORY_RECORD},
            # A key that is no class's name ("vcpu") is no schema error in Placement but an unknown
            # class (400 "No such resource class vcpu."); its record is checked all the same, where
            # Placement fails on one that is not a valid record (a 500).
            "additionalProperties": INVENTORY_RECORD,
        },
    },
    "required": ["resource_provider_generation", "inventories"],
    "additionalProperties": False,
}
