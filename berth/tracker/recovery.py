"""Pending operations: how a claim's change survives a crash between the store and Placement.

Every change to a claim is done in three steps: mark the claim in the store with the operation
(``pending_op``, committed before anything else happens), write Placement, then clear the mark (or
delete the claim). A tracker that restarts, and every audit, finds the marks and settles them:

    pending op   begun by                          finishing it                              undoing it
    -----------  --------------------------------  ----------------------------------------  --------------------
    claim        instance_claim, the move claims   Placement holds the claim's allocations   the claim is dropped:
                 (destination), before writing     (for a move, the migration the old side   Placement never got
                                                   too): the mark is cleared, claim kept     it, or refused it
    release      abort of an active claim, shelve  the consumer holds nothing on the host's  never: a release that
                 offload, reclaim, the audit       providers nor its shared disk; the        was asked for is
                                                   claim is dropped                          always finished
    delete       delete_instance                   the instance and its migration hold       never
                                                   nothing anywhere; the claim is dropped
    revert_in    revert, drop or abort of an       the instance holds again what the         never
                 incoming claim (destination)      migration held, with its old shared
                                                   disk, the migration nothing; the claim
                                                   is dropped
    confirm_out  confirm or drop of an outgoing    the migration holds nothing; the claim    never
                 claim (source)                    is dropped
    revert_out   revert or abort of an outgoing    the instance holds again what the         never
                 claim (source)                    migration held; the claim is the
                                                   instance's again, active
    evacuated    the source's clean-up after an    the evacuation's migration holds          never
                 evacuation (start, cleanup_       nothing; the claim is dropped
                 evacuated)
    forget       the audit (a stale move), the     the claim is dropped; Placement is not    never
                 clean-up of an evacuation that    touched
                 found no migration

Only a claim can be undone: until its allocations are in Placement nobody relies on it. Every other
operation was asked for and is finished, however often: each Placement step is written as "make the
consumers hold exactly this" (``berth.tracker.consumer_writer``), so doing it again is harmless.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import StrEnum
from typing import Any

from berth.clients.placement import ConsumerState, PlacementClient
from berth.domain.host.records import ACTIVE, INCOMING, INSTANCE, MIGRATION, ClaimRecord
from berth.tracker.consumer_writer import ConsumerWriter, Desired
from berth.tracker.errors import StoreError
from berth.tracker.store import ClaimStore

LOG = logging.getLogger(__name__)


class PendingOp(StrEnum):
    CLAIM = "claim"
    RELEASE = "release"
    DELETE = "delete"
    REVERT_IN = "revert_in"
    CONFIRM_OUT = "confirm_out"
    REVERT_OUT = "revert_out"
    EVACUATED = "evacuated"
    FORGET = "forget"


def _marked_op(record: ClaimRecord) -> PendingOp:
    if record.pending_op is None:
        raise StoreError(f"claim {record.claim_id} is not marked with an operation")
    return PendingOp(record.pending_op)


class PendingOperations:
    """Marks a claim with an operation, does it, and settles whatever a crash left marked."""

    def __init__(
        self,
        host: str,
        store: ClaimStore,
        placement: PlacementClient,
        writer: ConsumerWriter,
        our_providers: Callable[[], set[str]],
    ):
        self.host = host
        self.store = store
        self.placement = placement
        self.writer = writer
        self.our_providers = our_providers
        self._steps: dict[PendingOp, Callable[[ClaimRecord], str]] = {
            PendingOp.CLAIM: self.settle_claim,
            PendingOp.RELEASE: self._release,
            PendingOp.DELETE: self._delete,
            PendingOp.REVERT_IN: self._revert_in,
            PendingOp.CONFIRM_OUT: self._confirm_out,
            PendingOp.REVERT_OUT: self._revert_out,
            PendingOp.EVACUATED: self._evacuated,
            PendingOp.FORGET: self._forget,
        }

    def run(self, record: ClaimRecord, op: PendingOp, **changes: Any) -> str:
        """Mark ``record`` with ``op`` in the store, then do ``op`` (which ends by unmarking or deleting)."""
        marked = self.store.update(record, pending_op=op.value, **changes)
        return self._steps[op](marked)

    def recover(self) -> list[dict[str, str]]:
        """Settle every operation a crash interrupted."""
        done = []
        for record in self.store.pending():
            op = _marked_op(record)
            outcome = self._steps[op](record)
            LOG.info("%s: recovered %s of claim %s: %s", self.host, op, record.claim_id, outcome)
            done.append(
                {"claim_id": record.claim_id, "instance_uuid": record.instance_uuid, "op": op.value, "outcome": outcome}
            )
        return done

    # -- the steps, each one safe to repeat -------------------------------------------------------

    def settle_claim(self, record: ClaimRecord) -> str:
        """A claim that may or may not have reached Placement: keep it if it did, drop it if not."""
        instance = self.placement.consumer(record.instance_uuid)
        landed = bool(record.allocations) and instance.on(self.our_providers()) == record.allocations
        if record.state == INCOMING:
            landed = landed and bool(self.placement.consumer(record.migration).allocations)
        if landed:
            self.store.update(record, pending_op=None)
            return "kept"
        self.store.delete(record.claim_id)
        return "dropped"

    def _release(self, record: ClaimRecord) -> str:
        """The instance gives back what it holds of this host (and its shared disk)."""
        ours = self.our_providers() | set(record.shared_allocations)
        consumer = record.consumer_uuid
        self.writer.rewrite(
            [consumer],
            lambda s: {consumer: (s[consumer].outside(ours), None)},
            owner=record.owner,
            what=f"release of {record.instance_uuid}",
        )
        self.store.delete(record.claim_id)
        return "released"

    def _delete(self, record: ClaimRecord) -> str:
        """The instance is gone: it and its migration hold nothing anywhere."""
        consumers = [record.instance_uuid] + ([record.migration_uuid] if record.migration_uuid else [])
        self.writer.clear(*consumers)
        self.store.delete(record.claim_id)
        return "deleted"

    def _revert_in(self, record: ClaimRecord) -> str:
        """Destination side of a revert: the instance takes back what the migration held."""
        self._swap_back(record, shared=record.move.old_shared)
        self.store.delete(record.claim_id)
        return "reverted"

    def _confirm_out(self, record: ClaimRecord) -> str:
        """Source side of a confirm: the migration consumer's hold on this host ends."""
        migration = record.migration
        self.writer.clear(migration)
        self.store.delete(record.claim_id)
        return "confirmed"

    def _revert_out(self, record: ClaimRecord) -> str:
        """Source side of a revert: the claim is the instance's again (swapping back if still needed)."""
        self._swap_back(record, shared=record.shared_allocations)
        instance = record.instance_uuid
        self.store.update(record, state=ACTIVE, consumer_uuid=instance, migration_uuid=None, pending_op=None)
        return "restored"

    def _swap_back(self, record: ClaimRecord, *, shared: dict[str, dict[str, int]]) -> None:
        """The instance holds what the migration held (and ``shared``); the migration nothing."""
        instance, migration = record.instance_uuid, record.migration

        def desired(s: dict[str, ConsumerState]) -> Desired:
            held = s[migration].allocations
            if not held or s[migration].consumer_type != MIGRATION:
                # Swapped back already (by the other side), or never swapped: what a consumer of
                # another type holds (the uuid another instance's, by a conductor's mistake) is not
                # this move's to hand over.
                return {}
            return {instance: ({**held, **shared}, INSTANCE), migration: ({}, MIGRATION)}

        self.writer.rewrite([instance, migration], desired, owner=record.owner, what=f"revert of {migration}")

    def _evacuated(self, record: ClaimRecord) -> str:
        """Source side after an evacuation: the migration consumer's hold ends, the claim is forgotten."""
        migration = record.migration
        self.writer.clear(migration)
        self.store.delete(record.claim_id)
        return "cleaned"

    def _forget(self, record: ClaimRecord) -> str:
        self.store.delete(record.claim_id)
        return "forgotten"
