"""Claim leases: the body of PUT /berth/leases/{consumer_uuid}."""

from __future__ import annotations

from typing import Any, Final

from berth.store.leases.ledger import MAX_LEASE_SECONDS

LEASE_PUT: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        # Seconds from now; 0 expires the lease at once: the reaper's next pass, or a confirmation
        # or extension before it (refused, 409), releases it.
        "expires_in": {"type": "number", "minimum": 0, "maximum": MAX_LEASE_SECONDS},
    },
    "required": ["expires_in"],
    "additionalProperties": False,
}
