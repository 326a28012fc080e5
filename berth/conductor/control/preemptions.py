"""The preemptions the service recorded, seen through to their servers' end.

A build ends its own victims (``operations.preemption``), but a conductor may die between the
service's pick and that, a victim may be busy with another operation then, or its host's agent
away. So each round of every conductor's housekeeping reads the service's record
(``GET /berth/preemptions``, from the newest time it read the round before) and ends each
recorded victim whose server is still on a host: not deleted, not offloaded, no operation in
flight, and holding no allocations in the service (a server preempted, offloaded and unshelved
since holds allocations again, and is left alone). Those that cannot be ended now are looked at
again every round until they can.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

from berth.clients.placement import PlacementClient
from berth.conductor.operations import preemption
from berth.conductor.records import server_states
from berth.conductor.records.servers import ServerRecords
from berth.conductor.runner import Runner
from berth.conductor.victims import VictimServer
from berth.domain.errors import NotFound

LOG = logging.getLogger(__name__)

PREEMPTIONS_PATH = "/berth/preemptions"
# The states a preempted server has nothing left to end in.
_ENDED = (server_states.DELETED, server_states.SHELVED_OFFLOADED)


class RecordedServers:
    """The victims' servers as the conductors' records have them."""

    def __init__(self, servers: ServerRecords):
        self.servers = servers

    def victim_server(self, instance_uuid: str) -> VictimServer | None:
        try:
            row = self.servers.get(instance_uuid, deleted=True)
        except NotFound:
            return None
        flavor = (row["request"] or {}).get("flavor")
        ended = row["deleted_at"] is not None or row["status"] in _ENDED
        move = row["move_id"]
        return VictimServer(row["host"], preemption.action_of(flavor), ended, str(move) if move else None)


class Preemptions:
    def __init__(self, placement: PlacementClient, servers: ServerRecords, runner: Runner):
        self.placement = placement
        self.servers = servers
        self.runner = runner
        # The newest preempted_at read (the next read starts there), and the victims left to try again.
        self._since: str | None = None
        self._unsettled: dict[str, dict[str, Any]] = {}

    def reconcile(self) -> int:
        """Every recorded victim whose server still runs, ended; how many were."""
        query = {"since": self._since} if self._since else {}
        path = f"{PREEMPTIONS_PATH}?{urlencode(query)}" if query else PREEMPTIONS_PATH
        records = self.placement.get(path)["preemptions"]
        for record in records:
            self._unsettled.setdefault(str(record["consumer_uuid"]), record)
            when = str(record["preempted_at"])
            self._since = max(self._since or when, when)
        ended = 0
        for victim, record in list(self._unsettled.items()):
            settled, done = self._settle(victim, record)
            ended += done
            if settled:
                del self._unsettled[victim]
        return ended

    def _settle(self, victim: str, record: dict[str, Any]) -> tuple[bool, int]:
        """(whether nothing is left to do for it, whether it was ended now)."""
        try:
            row = self.servers.get(victim)
        except NotFound:
            return True, 0  # not a server of this cloud, or deleted
        if row["status"] in _ENDED:
            return True, 0
        if row["operation_id"] is not None:
            return False, 0  # its operation ends first (a build failing at its lease's confirmation)
        if self.placement.consumer(victim).allocations:
            return True, 0  # it holds allocations again: unshelved since, or never preempted here
        by = str(record["preempted_by"])
        outcome = preemption.end_victim(self.runner, victim, by, row["host"])
        LOG.info("preemption of %s by %s, recorded: %s", victim, by, outcome)
        return outcome != preemption.LEFT, int(outcome == preemption.ENDED)
