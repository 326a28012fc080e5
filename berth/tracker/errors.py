"""The tracker's own errors, under one root, and how it raises the host model's refusals.

    TrackerError                        what the tracker cannot do, of its own
    ├── ConfigError                     a configuration file or value is wrong (the agent exits with 2)
    │   └── ProviderConfigError         ... in a provider config file
    ├── StoreError                      the claim store cannot be used (another schema, a claim gone)
    └── GuestError                      a guest operation refused or failed; carries the ``status``
        ├── NoLiveClaim                 and ``code`` its agent answers (``AgentClient`` raises them
        ├── GuestConflict               as ``AgentError`` with that code)
        ├── SpawnFailed
        └── GuestNotSupported

The tracker also raises errors of the clients' tree (``berth.clients.errors``, under ``ClientError``),
because they cross HTTP unchanged:

    PlacementError and its subclasses   what ``PlacementClient`` raises when the service says no or
                                        does not answer; the tracker lets them through (its agent
                                        answers them 502 or 503, ``placement.error``)
    ClaimError and its subclasses       a refused claim operation: the tracker raises these itself,
                                        its agent answers them with their ``status`` and ``code``, and
                                        ``AgentClient`` raises the same class on the conductor's side

Catch ``(TrackerError, ClientError)`` for "the tracker said no"; anything else is a bug.

The host model (``berth.domain.host``) refuses with errors of its own, which carry no status:
``claim_error`` gives the claim error for one (``DoesNotFit`` is ``ClaimFailed``,
``WrongClaimState`` is ``ClaimStateError``, ``InvalidHostRequest`` and ``InvalidSnapshot`` are
``InvalidRequest``, with the same message and reasons), and ``host_model_refusals()`` turns them
into it around the tracker's calls of the model.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from berth.clients import agent_error_codes
from berth.clients.errors import AgentRefusal, ClaimError, ClaimFailed, ClaimStateError, InvalidRequest
from berth.domain.host.errors import DoesNotFit, HostModelError, WrongClaimState


class TrackerError(Exception):
    """The root: what the tracker cannot do, of its own (its refusals of claims are ``ClaimError``)."""


# --- configuration -------------------------------------------------------------------------------


class ConfigError(TrackerError):
    """A configuration file or value is wrong; the message names the file and key."""


class ProviderConfigError(ConfigError):
    """A provider config file is wrong (an undeclared class, an unknown trait, a clash with the driver)."""


# --- the claim store ---------------------------------------------------------------------------------


class StoreError(TrackerError):
    """The claim store cannot be used: another schema version, or a claim that is not there."""


# --- guests -----------------------------------------------------------------------------------------


class GuestError(AgentRefusal, TrackerError):
    """A guest operation was refused or failed; ``status`` and ``code`` are what the agent answers with."""

    code = agent_error_codes.GUEST_CONFLICT


class NoLiveClaim(GuestError):
    """The operation names no claim of this instance in a state that lets a guest run in it."""

    code = agent_error_codes.GUEST_NO_LIVE_CLAIM


class GuestConflict(GuestError):
    """The guest runs here with another claim, or is not here to be moved."""


class SpawnFailed(GuestError):
    """The hypervisor did not start the guest."""

    status = 500
    code = agent_error_codes.GUEST_SPAWN_FAILED


class GuestNotSupported(GuestError):
    """The driver cannot run guests (or inject faults)."""

    status = 501
    code = agent_error_codes.GUEST_NOT_SUPPORTED


# --- the host model's refusals ---------------------------------------------------------------------


def claim_error(error: HostModelError) -> ClaimError:
    """The claim error for a refusal of the host model: the agent answers it as it always has."""
    if isinstance(error, DoesNotFit):
        return ClaimFailed(error.reasons)
    if isinstance(error, WrongClaimState):
        return ClaimStateError(str(error))
    return InvalidRequest(str(error))


@contextmanager
def host_model_refusals() -> Iterator[None]:
    """Inside this block the host model's refusals are raised as the tracker's claim errors."""
    try:
        yield
    except HostModelError as e:
        raise claim_error(e) from e
