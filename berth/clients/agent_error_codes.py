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
