"""What a claim holds: allocations, NUMA cells, PCI devices, moves; and its JSON form.

The compute tracker's store keeps these records, its agent answers them, and ``AgentClient`` reads
them back (``to_dict`` and ``from_dict`` are that one JSON form). The NUMA cells and PCI devices
themselves (``CellAssignment``, ``PciAssignment``) are in ``assignments.py``.

A ``ClaimRecord`` is one claim of one host in one state:

    state          held by (consumer)    set only in this state
    active         the instance          -
    soft_deleted   the instance          -
    shelved        the instance          -
    incoming       the instance          migration_uuid, migration_context (both sides of the move)
    outgoing       the migration         migration_uuid (= consumer_uuid)

``record.migration`` and ``record.move`` read what only a move's states carry and raise
``WrongClaimState`` on any other claim, instead of handing on a None (the tracker answers it as its
``ClaimStateError``). A malformed ``SourceContext`` document is an ``InvalidHostRequest``.
"""

from __future__ import annotations

import time
import uuid as uuidlib
from dataclasses import dataclass, field, replace
from typing import Any

from berth.domain.host.allocations import Allocations
from berth.domain.host.allocations import parse as parse_allocations
from berth.domain.host.assignments import CellAssignment, PciAssignment, cells_from, devices_from
from berth.domain.host.errors import InvalidHostRequest, WrongClaimState
from berth.domain.host.request import Flavor

# States of a claim on its host.
ACTIVE = "active"  # the instance runs (or is being built) here
INCOMING = "incoming"  # a move to this host is in flight; the instance consumer holds it
OUTGOING = "outgoing"  # a move away is in flight; the migration consumer holds it
SOFT_DELETED = "soft_deleted"
SHELVED = "shelved"
STATES = (ACTIVE, INCOMING, OUTGOING, SOFT_DELETED, SHELVED)
MOVING = (INCOMING, OUTGOING)
KINDS = ("instance", "resize", "live_migration", "evacuate", "adopted")

# Placement's consumer types, as the claims' consumers are written.
INSTANCE = "INSTANCE"
MIGRATION = "MIGRATION"


@dataclass(frozen=True)
class MigrationContext:
    """Both sides of a move, kept with the destination's claim until the move is confirmed or reverted."""

    migration_uuid: str
    kind: str
    source_host: str
    dest_host: str
    old_flavor: Flavor | None
    new_flavor: Flavor
    old_numa: tuple[CellAssignment, ...]
    new_numa: tuple[CellAssignment, ...]
    old_pci: tuple[PciAssignment, ...]
    new_pci: tuple[PciAssignment, ...]
    old_allocations: Allocations  # what the migration consumer holds (the source's providers)
    old_shared: Allocations  # the instance's allocations on sharing providers before the move

    def to_dict(self) -> dict[str, Any]:
        return {
            "migration_uuid": self.migration_uuid,
            "kind": self.kind,
            "source_host": self.source_host,
            "dest_host": self.dest_host,
            "old_flavor": self.old_flavor.to_dict() if self.old_flavor else None,
            "new_flavor": self.new_flavor.to_dict(),
            "old_numa": [c.to_dict() for c in self.old_numa],
            "new_numa": [c.to_dict() for c in self.new_numa],
            "old_pci": [p.to_dict() for p in self.old_pci],
            "new_pci": [p.to_dict() for p in self.new_pci],
            "old_allocations": self.old_allocations,
            "old_shared": self.old_shared,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MigrationContext:
        return cls(
            d["migration_uuid"],
            d["kind"],
            d["source_host"],
            d["dest_host"],
            Flavor.from_dict(d["old_flavor"]) if d.get("old_flavor") else None,
            Flavor.from_dict(d["new_flavor"]),
            cells_from(d.get("old_numa")),
            cells_from(d.get("new_numa")),
            devices_from(d.get("old_pci")),
            devices_from(d.get("new_pci")),
            parse_allocations(d.get("old_allocations")),
            parse_allocations(d.get("old_shared")),
        )


@dataclass(frozen=True)
class SourceContext:
    """What the source host hands over when a move starts (``begin_move_out``)."""

    host: str
    instance_uuid: str
    migration_uuid: str
    flavor: Flavor
    allocations: Allocations
    shared_allocations: Allocations
    numa: tuple[CellAssignment, ...]
    pci: tuple[PciAssignment, ...]
    project_id: str
    user_id: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "instance_uuid": self.instance_uuid,
            "migration_uuid": self.migration_uuid,
            "flavor": self.flavor.to_dict(),
            "allocations": self.allocations,
            "shared_allocations": self.shared_allocations,
            "numa": [c.to_dict() for c in self.numa],
            "pci": [p.to_dict() for p in self.pci],
            "project_id": self.project_id,
            "user_id": self.user_id,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SourceContext:
        try:
            return cls(
                d["host"],
                d["instance_uuid"],
                d["migration_uuid"],
                Flavor.from_dict(d["flavor"]),
                parse_allocations(d["allocations"]),
                parse_allocations(d.get("shared_allocations")),
                cells_from(d.get("numa")),
                devices_from(d.get("pci")),
                d["project_id"],
                d["user_id"],
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InvalidHostRequest(f"invalid source context: {e}") from None


@dataclass(frozen=True)
class ClaimRecord:
    """One claim as persisted by the tracker's store."""

    claim_id: str
    host: str
    instance_uuid: str
    consumer_uuid: str  # the Placement consumer holding ``allocations`` (instance or migration)
    kind: str
    state: str
    project_id: str
    user_id: str
    flavor: Flavor
    allocations: Allocations  # on this host's providers
    shared_allocations: Allocations = field(default_factory=dict)  # on sharing providers, held by the instance
    numa: tuple[CellAssignment, ...] = ()
    pci: tuple[PciAssignment, ...] = ()
    migration_uuid: str | None = None  # incoming and outgoing claims (and an evacuation being cleaned up)
    migration_context: MigrationContext | None = None  # incoming claims
    pending_op: str | None = None  # an operation begun but not known to be finished (the tracker's recovery)
    # The anti-affinity group the instance said it was in when it claimed (``anti_affinity``).
    anti_affinity_group: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    state_changed_at: float = 0.0

    @classmethod
    def new(cls, **fields: Any) -> ClaimRecord:
        now = time.time()
        return cls(claim_id=str(uuidlib.uuid4()), created_at=now, updated_at=now, state_changed_at=now, **fields)

    def evolve(self, **changes: Any) -> ClaimRecord:
        changes.setdefault("updated_at", time.time())
        if "state" in changes and changes["state"] != self.state:
            changes.setdefault("state_changed_at", changes["updated_at"])
        return replace(self, **changes)

    @property
    def owner(self) -> tuple[str, str]:
        """(project, user) the claim's consumers are written for."""
        return self.project_id, self.user_id

    @property
    def migration(self) -> str:
        """The move this claim takes part in."""
        if self.migration_uuid is None:
            raise WrongClaimState(f"claim {self.claim_id} of {self.instance_uuid} ({self.state}) takes part in no move")
        return self.migration_uuid

    @property
    def move(self) -> MigrationContext:
        """Both sides of the move an incoming claim is for."""
        if self.migration_context is None:
            raise WrongClaimState(f"claim {self.claim_id} of {self.instance_uuid} ({self.state}) has no move context")
        return self.migration_context

    @property
    def holds_shared(self) -> bool:
        """Whether this claim's consumer holds its shared disk: all but the outgoing side of a move,
        whose disk stays with the instance (and is counted by the destination's claim)."""
        return self.state != OUTGOING

    def body(self) -> dict[str, Any]:
        """The fields the store keeps as a JSON document."""
        return {
            "flavor": self.flavor.to_dict(),
            "allocations": self.allocations,
            "shared_allocations": self.shared_allocations,
            "numa": [c.to_dict() for c in self.numa],
            "pci": [p.to_dict() for p in self.pci],
            "migration_context": self.migration_context.to_dict() if self.migration_context else None,
            "anti_affinity_group": self.anti_affinity_group,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim_id": self.claim_id,
            "host": self.host,
            "instance_uuid": self.instance_uuid,
            "consumer_uuid": self.consumer_uuid,
            "kind": self.kind,
            "state": self.state,
            "project_id": self.project_id,
            "user_id": self.user_id,
            "migration_uuid": self.migration_uuid,
            "pending_op": self.pending_op,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "state_changed_at": self.state_changed_at,
            **self.body(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ClaimRecord:
        return cls(
            claim_id=d["claim_id"],
            host=d["host"],
            instance_uuid=d["instance_uuid"],
            consumer_uuid=d["consumer_uuid"],
            kind=d["kind"],
            state=d["state"],
            project_id=d["project_id"],
            user_id=d["user_id"],
            flavor=Flavor.from_dict(d["flavor"]),
            allocations=parse_allocations(d["allocations"]),
            shared_allocations=parse_allocations(d.get("shared_allocations")),
            numa=cells_from(d.get("numa")),
            pci=devices_from(d.get("pci")),
            migration_uuid=d.get("migration_uuid"),
            migration_context=MigrationContext.from_dict(d["migration_context"])
            if d.get("migration_context")
            else None,
            pending_op=d.get("pending_op"),
            anti_affinity_group=d.get("anti_affinity_group"),
            created_at=d.get("created_at", 0.0),
            updated_at=d.get("updated_at", 0.0),
            state_changed_at=d.get("state_changed_at", 0.0),
        )
