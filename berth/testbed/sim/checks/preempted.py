"""The preemptions of a run (``--preemptible``): what the service recorded, and the run's belief of
each victim brought in line with how the conductors ended it.

A build of a flavor above priority 0 that finds no room has the service's pick remove servers of
priority 0 and claim their room; the conductors then delete or offload those servers, behind the
run's back. At the finish, once every recorded victim's server is ended (or holds allocations
again: one offloaded and unshelved since, or one whose resize was reverted), the run takes each
ended victim as deleted or offloaded, as the conductors' records show it, so that the invariants
check it as gone; ``preempted_gone`` checks that a victim ended holds nothing in the service and
no claim on any host.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import Final

import sqlalchemy as sa

from berth.clients.placement import PlacementClient
from berth.conductor.journal import Journal
from berth.conductor.records.tables import servers
from berth.testbed.sim.instances import DELETED, OFFLOADED, Instances

LOG = logging.getLogger(__name__)

# The most records read (the service's own limit of one read).
MOST_RECORDS: Final = 10000
# The conductors' states of a server that has nothing left running.
_ENDED: Final = {"DELETED": DELETED, "SHELVED_OFFLOADED": OFFLOADED}


@dataclass
class Preempted:
    # Every consumer the service's picks removed (one record each).
    victims: set[str] = field(default_factory=set)
    # The victims whose servers the conductors ended for it (their fault says "preempted by").
    ended: set[str] = field(default_factory=set)
    # The victims still running without allocations when the finish gave up waiting.
    unsettled: set[str] = field(default_factory=set)


def settle(placement_url: str, journal: Journal, instances: Instances, deadline: float) -> Preempted:
    """Wait (until ``deadline``) for the conductors to end every recorded victim, then put the ended
    ones in the run's belief as the conductors' records have them."""
    placement = PlacementClient(placement_url)
    records = placement.get(f"/berth/preemptions?limit={MOST_RECORDS}")["preemptions"]
    found = Preempted(victims={str(r["consumer_uuid"]) for r in records})
    rows: dict[str, sa.RowMapping] = {}
    while True:
        rows = _rows(journal, found.victims)
        waiting = {
            v for v, row in rows.items() if row["status"] not in _ENDED and not placement.consumer(v).allocations
        }
        if not waiting or time.monotonic() > deadline:
            found.unsettled = waiting
            break
        time.sleep(0.5)
    every = instances.every()
    for victim, row in rows.items():
        state = _ENDED.get(str(row["status"]))
        if state is None:
            continue
        if str(row["fault"] or "").startswith("preempted by"):
            found.ended.add(victim)
        believed = every.get(victim)
        if believed is not None and believed.state != state:
            instances.put(replace(believed, state=state, host=None, move=None, pending=None))
    if found.unsettled:
        LOG.warning("victims still running without allocations: %s", ", ".join(sorted(found.unsettled)))
    return found


def _rows(journal: Journal, victims: set[str]) -> dict[str, sa.RowMapping]:
    """The conductors' rows of the victims that are servers of the run, deleted ones included."""
    if not victims:
        return {}
    query = sa.select(servers.c.id, servers.c.status, servers.c.fault).where(servers.c.id.in_(sorted(victims)))
    return journal.read(lambda conn: {str(r["id"]): r for r in conn.execute(query).mappings()})
