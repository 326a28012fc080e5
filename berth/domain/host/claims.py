"""Claims as their callers hold them: a record to read and a way to undo it.

ClaimHandle          a context manager that aborts the claim when its block raises
├── Claim            a persisted claim (``record``), undone by its owner: a tracker or an agent's client
│   └── MoveClaim    the destination's claim of a move, whose abort reverts both sides
│                    (``berth.tracker.moving.moves``)
└── NopClaim         a claim that needed nothing (rebuild in place); aborting it does nothing

with tracker.instance_claim(instance) as claim:
    spawn(instance, claim.numa, claim.pci)      # an exception here frees everything
"""

from __future__ import annotations

import abc
from types import TracebackType
from typing import Any, Protocol, Self

from berth.domain.host.records import ClaimRecord


class ClaimOwner(Protocol):
    """Whoever can undo a claim: a compute tracker in this process or an agent's client."""

    def abort(self, claim_id: str) -> str | None: ...


class ClaimHandle(abc.ABC):
    """What a claim operation returns. As a context manager it aborts itself when the block fails."""

    @property
    @abc.abstractmethod
    def claim_id(self) -> str | None:
        """The claim's id; None when nothing was claimed."""

    @abc.abstractmethod
    def abort(self) -> None:
        """Undo the claim."""

    @abc.abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """The claim as the agent's API answers it."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is not None:
            self.abort()


class Claim(ClaimHandle):
    """A persisted claim; its record's fields read as the claim's own (``claim.numa``, ``claim.state``)."""

    def __init__(self, record: ClaimRecord, owner: ClaimOwner):
        self.record = record
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        # Only called for names the handle itself lacks: the record's fields.
        return getattr(self.record, name)

    @property
    def claim_id(self) -> str:
        return self.record.claim_id

    def abort(self) -> None:
        self._owner.abort(self.record.claim_id)

    def to_dict(self) -> dict[str, Any]:
        return self.record.to_dict()

    def __repr__(self) -> str:
        r = self.record
        return f"<{type(self).__name__} {r.claim_id} {r.kind}/{r.state} of {r.instance_uuid}>"


class NopClaim(ClaimHandle):
    """What a claim that needs no resources returns (rebuild on the same host)."""

    def __init__(self, instance_uuid: str, host: str):
        self.instance_uuid = instance_uuid
        self.host = host

    @property
    def claim_id(self) -> None:
        return None

    def abort(self) -> None:
        pass

    def to_dict(self) -> dict[str, Any]:
        return {"claim_id": None, "instance_uuid": self.instance_uuid, "host": self.host, "kind": "none"}

    def __repr__(self) -> str:
        return f"<NopClaim of {self.instance_uuid}>"
