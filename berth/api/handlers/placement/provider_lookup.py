"""The provider a path names (``/resource_providers/{uuid}/...``): looked up as the reference does.

The reference looks the provider up before it reads a write's body, so an unknown provider is a 404
whatever the body holds; Berth reads the body first (most writes then need one statement) and looks
the provider up only when the body is refused.  A media type other than JSON is still a 415 first.
Some reads word their 404 with the lookup's message twice, which ``repeated_not_found`` writes.
"""

from __future__ import annotations

from typing import Any

from berth.api.call import Call
from berth.api.validation import JsonSchema
from berth.domain.errors import BadRequest
from berth.store.placement import providers


def provider_json_body(call: Call, uuid: str, schema: JsonSchema) -> Any:
    """The request's body checked against ``schema``; a 404 rather than its refusal for an unknown
    provider."""
    try:
        return call.json_body(schema)
    except BadRequest:
        call.db.read(lambda conn: providers.require_provider(conn, uuid))
        raise


def repeated_not_found(uuid: str, separator: str) -> str:
    """The 404 of a route that puts the lookup's own message after its (identical) one."""
    message = f"No resource provider with uuid {uuid} found"
    return f"{message}{separator}{message}"
