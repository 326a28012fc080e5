"""What the conductor looks up of a server a preempting pick removed (``operations.preemption``):
where it runs and how its flavor says it ends; the conductors' API answers from its server
records, a conductor without them from its journal."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class VictimServer:
    host: str | None
    action: str  # berth.scheduler.request.priority's DELETE or SHELVE_OFFLOAD
    # A server deleted or offloaded already has nothing left to end.
    ended: bool = False
    # The resize or migration it awaits the confirmation of (VERIFY_RESIZE), confirmed before it ends.
    move_id: str | None = None


class VictimServers(Protocol):
    def victim_server(self, instance_uuid: str) -> VictimServer | None:
        """None: not a server of this cloud (a consumer another client made)."""
