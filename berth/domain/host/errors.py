"""The host model's own errors: a request that makes no sense, and a request that does not fit.

    HostModelError        anything the host model refuses
    ├── InvalidHostRequest  the request is malformed or contradicts itself (no host could take it)
    ├── DoesNotFit          the request is valid but this host cannot take it; ``reasons`` names
    │                       every shortage found
    ├── WrongClaimState     a claim lacks what its state promises (a move's fields on a claim that
    │                       takes part in no move)
    └── InvalidSnapshot     a host snapshot's document is malformed

They carry no HTTP status: the compute tracker turns them into its own claim errors (and so into
its agent's answers), a scheduler into a host it filters out.
"""

from __future__ import annotations

from collections.abc import Iterable


class HostModelError(Exception):
    """The root: anything the host model refuses."""


class InvalidHostRequest(HostModelError):
    """The request is malformed or contradicts itself; the message says how."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class DoesNotFit(HostModelError):
    """The request does not fit the host; ``reasons`` names every shortage found, each once."""

    def __init__(self, reasons: Iterable[str]):
        self.reasons = list(dict.fromkeys(reasons))
        super().__init__("the request does not fit this host: " + "; ".join(self.reasons))


class WrongClaimState(HostModelError):
    """A claim's record is asked for what only another state carries; the message names the claim."""


class InvalidSnapshot(HostModelError):
    """A host snapshot's document is malformed (a field missing or of the wrong kind)."""
