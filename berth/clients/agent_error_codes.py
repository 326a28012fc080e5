"""The error codes of the agent's HTTP API, each a named constant.

An agent answers an error with ``{"error": {"code", "message", "reasons"}}``; the claim codes are
those of the ``ClaimError`` classes (``berth.clients.errors``), which ``AgentClient`` raises again
for them. A code is part of that contract: never change one's value or reuse it for another
meaning; add a new one. Placement's own codes, which the clients read in the service's answers, are
in ``berth.domain.error_codes``.
"""

from __future__ import annotations

from typing import Final

# A claim operation was refused (the instance already has a claim, a move is in the way, ...).
CLAIM_REFUSED: Final = "claim.refused"
# The request does not fit this host; ``reasons`` names every shortage found.
CLAIM_DOES_NOT_FIT: Final = "claim.does_not_fit"
# No such claim, or the instance has no claim on this host.
CLAIM_NOT_FOUND: Final = "claim.not_found"
# The request is malformed (not JSON, a field missing or of the wrong kind).
CLAIM_INVALID_REQUEST: Final = "claim.invalid_request"
# A claim is not in the state the operation needs (a move step on a claim that takes part in no move).
CLAIM_WRONG_STATE: Final = "claim.wrong_state"
# Placement did not answer, or the host is not reported yet: try again later.
CLAIM_PLACEMENT_UNAVAILABLE: Final = "claim.placement_unavailable"
# Placement answered an error the tracker did not expect.
PLACEMENT_ERROR: Final = "placement.error"
# The request did not reach an operation: unknown path, wrong method.
HTTP_ERROR: Final = "http.error"
# The agent failed; its log has the traceback.
INTERNAL: Final = "internal"
# The agent requires an X-Auth-Token and none (or a wrong one) was given.
AUTH_REQUIRED: Final = "auth.required"
# A guest operation names no live claim: no such claim, another instance's, or one in the wrong state.
GUEST_NO_LIVE_CLAIM: Final = "guest.no_live_claim"
# The guest already runs here with another claim (destroy it first), or is not here to move.
GUEST_CONFLICT: Final = "guest.conflict"
# The hypervisor failed to start the guest; the claim is left for the caller to abort.
GUEST_SPAWN_FAILED: Final = "guest.spawn_failed"
# This host's driver cannot run guests (the linux driver only discovers them), or has no faults to set.
GUEST_NOT_SUPPORTED: Final = "guest.not_supported"
