"""The guests' side of the tracker: a guest runs in a live claim, or not at all.

Every operation takes the host's lock, as the claims do, so the audit never sees a guest half
started nor a claim released under a guest being spawned; the driver does the work
(``berth.tracker.drivers.base``).

- ``spawn``: the claim must be this instance's, settled (no operation pending) and ``active`` (a
  build, an unshelve) or ``incoming`` (the destination of a resize, cold migration or evacuation).
  A guest already running in the same claim is answered as it is (``created`` False); one running
  in another claim is a conflict (destroy it first: a resize on the same host restarts the guest).
- ``destroy``: always allowed, whatever the claims say; a guest that is not there is not an error.
- ``accept_migration`` (destination): the claim must be this instance's ``incoming`` claim.
- ``migrate_out`` (source): the instance must have an ``outgoing`` claim here; a guest already gone
  is not an error.
- ``plant`` (a fault, fake driver only): a guest in no claim, as if started outside the tracker, for
  the audit to find (``instance_without_claim``); refused when the instance has a guest or a claim
  here, since then it would not be an orphan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from berth.domain.host.records import ACTIVE, INCOMING, OUTGOING, ClaimRecord
from berth.tracker.errors import GuestConflict, NoLiveClaim
from berth.tracker.facts import RUNNING, Guest

if TYPE_CHECKING:
    from berth.tracker.tracker import ResourceTracker

SPAWNABLE = (ACTIVE, INCOMING)


def guests(tracker: ResourceTracker) -> list[Guest]:
    """The guests the driver has, by instance uuid."""
    return [guest for _, guest in sorted(tracker.driver.guests().items())]


def spawn(tracker: ResourceTracker, instance_uuid: str, claim_id: str) -> tuple[Guest, bool]:
    """Run the instance's guest in ``claim_id``: (the guest, whether it was started now)."""
    with tracker.lock:
        claim = _live_claim(tracker, instance_uuid, claim_id, SPAWNABLE)
        existing = _same_claim(tracker, instance_uuid, claim)
        if existing is not None:
            return existing, False
        return tracker.driver.spawn(instance_uuid, claim), True


def destroy(tracker: ResourceTracker, instance_uuid: str) -> bool:
    """Remove the instance's guest; False when there was none."""
    with tracker.lock:
        return tracker.driver.destroy(instance_uuid)


def accept_migration(tracker: ResourceTracker, instance_uuid: str, claim_id: str) -> tuple[Guest, bool]:
    """The destination of a live migration: the guest arrives in the instance's incoming claim."""
    with tracker.lock:
        claim = _live_claim(tracker, instance_uuid, claim_id, (INCOMING,))
        existing = _same_claim(tracker, instance_uuid, claim)
        if existing is not None:
            return existing, False
        return tracker.driver.accept_migration(instance_uuid, claim), True


def migrate_out(tracker: ResourceTracker, instance_uuid: str, destination_host: str) -> bool:
    """The source of a live migration: the guest leaves; False when it had already left."""
    with tracker.lock:
        if not any(r.state == OUTGOING for r in tracker.store.for_instance(instance_uuid)):
            raise NoLiveClaim(
                f"instance {instance_uuid} is not moving away from {tracker.host}: "
                "the source's claim must be handed over first (begin_move_out)"
            )
        return tracker.driver.migrate_out(instance_uuid, destination_host)


def set_faults(tracker: ResourceTracker, settings: dict[str, Any]) -> dict[str, Any]:
    with tracker.lock:
        return tracker.driver.set_faults(settings)


def plant(
    tracker: ResourceTracker, instance_uuid: str, *, state: str = RUNNING, resources: dict[str, int] | None = None
) -> Guest:
    """An orphan guest on the host: running (or stopped) in no claim, using ``resources`` if given."""
    with tracker.lock:
        if instance_uuid in tracker.driver.guests():
            raise GuestConflict(f"guest {instance_uuid} is on {tracker.host} already")
        if tracker.store.for_instance(instance_uuid):
            raise GuestConflict(
                f"instance {instance_uuid} has a claim on {tracker.host}: a guest planted for it would not be an orphan"
            )
        return tracker.driver.plant_guest(Guest(instance_uuid, state, None, resources))


def _live_claim(tracker: ResourceTracker, instance_uuid: str, claim_id: str, states: tuple[str, ...]) -> ClaimRecord:
    record = tracker.store.get(claim_id)
    if record is None or record.instance_uuid != instance_uuid:
        raise NoLiveClaim(f"instance {instance_uuid} has no claim {claim_id} on {tracker.host}")
    if record.pending_op is not None or record.state not in states:
        raise NoLiveClaim(
            f"claim {claim_id} of {instance_uuid} is {record.state}"
            + (f" ({record.pending_op} pending)" if record.pending_op else "")
            + f"; a guest runs in a claim that is {' or '.join(states)}"
        )
    return record


def _same_claim(tracker: ResourceTracker, instance_uuid: str, claim: ClaimRecord) -> Guest | None:
    """The guest already running in ``claim``; a conflict when it runs in another one."""
    guest = tracker.driver.guests().get(instance_uuid)
    if guest is None:
        return None
    if guest.claim_id != claim.claim_id:
        raise GuestConflict(
            f"guest {instance_uuid} already runs on {tracker.host} in claim {guest.claim_id}, "
            f"not {claim.claim_id}: destroy it first"
        )
    return guest
