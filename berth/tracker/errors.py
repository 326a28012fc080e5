"""Every exception the tracker raises, under one root.

    TrackerError                        anything the tracker refuses or cannot do
    ├── ConfigError                     a configuration file or value is wrong (the agent exits with 2)
    │   └── ProviderConfigError         ... in a provider config file
    ├── StoreError                      the claim store cannot be used (another schema, a claim gone)
    ├── PlacementError                  the service answered an error: ``status``, ``code``, ``detail``
    │   ├── GenerationConflict          409 ``placement.concurrent_update``: read again and retry
    │   ├── CapacityExceeded            409: the allocation does not fit the inventory
    │   └── PlacementUnavailable        no answer at all, or 503 after the retries
    └── ClaimError                      a claim operation was refused: ``status``, ``code``, ``reasons``
        ├── ClaimFailed                 the request does not fit this host                 409
        ├── ClaimNotFound               no such claim                                       404
        ├── InvalidRequest              a malformed request                                 400
        ├── ClaimStateError             the claim is not in a state the operation needs     409
        ├── TrackerUnavailable          Placement did not answer, or the host is not reported  503
        └── AgentError                  an agent's error the client has no class for   (its status)

A ``ClaimError`` is what the agent's HTTP API answers with (its ``status`` and ``code``, from
``berth.tracker.error_codes``), and what ``AgentClient`` raises again on the conductor's side.
Catch ``TrackerError`` for "the tracker said no"; anything else is a bug.

The host model (``berth.domain.host``) refuses with errors of its own, which carry no status:
``claim_error`` gives the tracker's error for one (``DoesNotFit`` is ``ClaimFailed``,
``InvalidHostRequest`` is ``InvalidRequest``, with the same message and reasons), and
``host_model_refusals()`` turns them into it around the tracker's calls of the model.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from berth.domain.host.errors import DoesNotFit, HostModelError
from berth.tracker import error_codes


class TrackerError(Exception):
    """The root: anything the tracker refuses or cannot do."""


# --- configuration -------------------------------------------------------------------------------


class ConfigError(TrackerError):
    """A configuration file or value is wrong; the message names the file and key."""


class ProviderConfigError(ConfigError):
    """A provider config file is wrong (an undeclared class, an unknown trait, a clash with the driver)."""


# --- the claim store ---------------------------------------------------------------------------------


class StoreError(TrackerError):
    """The claim store cannot be used: another schema version, or a claim that is not there."""


# --- the Placement service ---------------------------------------------------------------------------


class PlacementError(TrackerError):
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


class PlacementUnavailable(PlacementError):
    """The service did not answer, or answered 503 every time it was asked."""


# --- claims --------------------------------------------------------------------------------------------


class ClaimError(TrackerError):
    """A claim operation was refused; ``status`` and ``code`` are what the agent answers with."""

    status: int = 409
    code: str = error_codes.CLAIM_REFUSED

    def __init__(self, message: str, *, reasons: Iterable[str] = ()):
        super().__init__(message)
        self.message = message
        self.reasons = list(reasons)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "reasons": self.reasons}


class ClaimFailed(ClaimError):
    """The request does not fit this host; ``reasons`` names every shortage found."""

    code = error_codes.CLAIM_DOES_NOT_FIT

    def __init__(self, reasons: Iterable[str]):
        unique = list(dict.fromkeys(reasons))
        super().__init__("the request does not fit this host: " + "; ".join(unique), reasons=unique)


class ClaimNotFound(ClaimError):
    status = 404
    code = error_codes.CLAIM_NOT_FOUND


class InvalidRequest(ClaimError):
    status = 400
    code = error_codes.CLAIM_INVALID_REQUEST


class ClaimStateError(ClaimError):
    """A claim lacks what its state promises (a move step on a claim that takes part in no move)."""

    code = error_codes.CLAIM_WRONG_STATE


class TrackerUnavailable(ClaimError):
    """Placement did not answer (the outcome is settled later), or the host is not reported yet."""

    status = 503
    code = error_codes.CLAIM_PLACEMENT_UNAVAILABLE


class AgentError(ClaimError):
    """An agent answered with an error that has no class of its own on this side."""

    def __init__(self, status: int, code: str | None, message: str, reasons: Iterable[str] = ()):
        super().__init__(message, reasons=reasons)
        self.status = status
        self.code = code or error_codes.INTERNAL


# --- the host model's refusals ---------------------------------------------------------------------


def claim_error(error: HostModelError) -> ClaimError:
    """The tracker's error for a refusal of the host model: the agent answers it as it always has."""
    if isinstance(error, DoesNotFit):
        return ClaimFailed(error.reasons)
    return InvalidRequest(str(error))


@contextmanager
def host_model_refusals() -> Iterator[None]:
    """Inside this block the host model's refusals are raised as the tracker's claim errors."""
    try:
        yield
    except HostModelError as e:
        raise claim_error(e) from e
