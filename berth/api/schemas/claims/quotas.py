"""Quotas: the body of PUT /berth/quotas/{project_id} and /berth/quotas/{project_id}/users/{user_id}."""

from __future__ import annotations

from typing import Final

from berth.api.validation import JsonSchema

# The largest amount an inventory's columns hold.
MAX_LIMIT: Final = 2**63 - 1

QUOTA_PUT: Final[JsonSchema] = {
    "type": "object",
    "properties": {
        # Resource class name (or "consumers") -> the most the project (or user) may hold. A
        # negative limit is refused by the handler, with its own code.
        "limits": {
            "type": "object",
            "additionalProperties": {"type": "integer", "maximum": MAX_LIMIT},
        },
    },
    "required": ["limits"],
    "additionalProperties": False,
}
