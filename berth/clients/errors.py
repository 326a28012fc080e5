"""Every error the clients raise, under one root: the service's answers and the agents' refusals.

    ClientError                         an answer of the service or of an agent that is not what was asked
    ├── PlacementError                  the service answered an error: ``status``, ``code``, ``detail``
    │   ├── GenerationConflict          409 ``placement.concurrent_update``: read again and retry
    │   ├── CapacityExceeded            409: the allocation does not fit the inventory
    │   ├── LeaseExpired                409 ``berth.lease.expired`` (or 404 on a confirm): the claim
    │   │                               lease had expired, and the service released the allocations
    │   └── PlacementUnavailable        no answer at all, or 503 after the retries
    └── ClaimError                      a claim operation was refused: ``status``, ``code``, ``reasons``
        ├── ClaimFailed                 the request does not fit this host                 409
        ├── ClaimNotFound               no such claim                                       404
        ├── InvalidRequest              a malformed request                                 400
        ├── ClaimStateError             the claim is not in a state the operation needs     409
        ├── TrackerUnavailable          Placement did not answer, or the host is not reported  503
        └── AgentError                  an agent's error the client has no class for   (its status)

``PlacementClient`` raises the ``PlacementError`` classes. A ``ClaimError`` is the contract between
an agent and its client: the compute tracker raises these very classes when it refuses a claim, its
agent answers one with its ``status`` and ``code`` (``berth.clients.agent_error_codes``), and
``AgentClient`` raises the class of that code again. So a caller catches the same class whether it
holds a tracker in its own process or an agent's client. The tracker's own errors (configuration,
claim store) are under ``berth.tracker.errors.TrackerError``, which draws how the two trees relate.
``ClaimError`` and the tracker's ``GuestError`` share ``AgentRefusal``: the form (status, code,
message, reasons) in which an agent answers a refusal.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from berth.clients import agent_error_codes


class ClientError(Exception):
    """The root: an answer of the service or of an agent that is not what was asked."""


# --- the Placement service ---------------------------------------------------------------------------


class PlacementError(ClientError):
    """The service answered with an error (``status`` 0: it did not answer at all)."""

    def __init__(self, status: int, code: str | None, detail: str, method: str = "", path: str = ""):
        super().__init__(f"{method} {path}: {status} {code or ''} {detail}".strip())
        self.status = status
        self.code = code
        self.detail = detail


class GenerationConflict(PlacementError):
    """Someone else changed the provider or consumer since it was read; re-read and try again."""


class CapacityExceeded(PlacementError):
    """The service refused an allocation: not enough room (or the inventory cannot take it)."""


class LeaseExpired(PlacementError):
    """A claim lease was confirmed or extended after it had expired: the service released the
    consumer's allocations (and the lease) instead. Whatever was to be built on them must not be."""


class PlacementUnavailable(PlacementError):
    """The service did not answer, or answered 503 every time it was asked."""


# --- claims --------------------------------------------------------------------------------------------


class AgentRefusal(Exception):
    """What an agent answers when it refuses an operation: ``status``, ``code``, the message and its
    reasons. The claim errors here and the tracker's guest errors both take this form."""

    status: int = 409
    code: str = agent_error_codes.CLAIM_REFUSED

    def __init__(self, message: str, *, reasons: Iterable[str] = ()):
        super().__init__(message)
        self.message = message
        self.reasons = list(reasons)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "reasons": self.reasons}


class ClaimError(AgentRefusal, ClientError):
    """A claim operation was refused; ``status`` and ``code`` are what the agent answers with."""


class ClaimFailed(ClaimError):
    """The request does not fit this host; ``reasons`` names every shortage found."""

    code = agent_error_codes.CLAIM_DOES_NOT_FIT

    def __init__(self, reasons: Iterable[str]):
        unique = list(dict.fromkeys(reasons))
        super().__init__("the request does not fit this host: " + "; ".join(unique), reasons=unique)


class ClaimNotFound(ClaimError):
    status = 404
    code = agent_error_codes.CLAIM_NOT_FOUND


class InvalidRequest(ClaimError):
    status = 400
    code = agent_error_codes.CLAIM_INVALID_REQUEST


class ClaimStateError(ClaimError):
    """A claim lacks what its state promises (a move step on a claim that takes part in no move)."""

    code = agent_error_codes.CLAIM_WRONG_STATE


class TrackerUnavailable(ClaimError):
    """Placement did not answer (the outcome is settled later), or the host is not reported yet."""

    status = 503
    code = agent_error_codes.CLAIM_PLACEMENT_UNAVAILABLE


class AgentError(ClaimError):
    """An agent answered with an error that has no class of its own on this side."""

    def __init__(self, status: int, code: str | None, message: str, reasons: Iterable[str] = ()):
        super().__init__(message, reasons=reasons)
        self.status = status
        self.code = code or agent_error_codes.INTERNAL
