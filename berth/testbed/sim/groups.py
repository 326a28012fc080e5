"""The simulation's anti-affinity server groups: which instances are members, as a caller of the
conductor would know them.

Each operation on a member is asked with its group as it is at that moment (``attach``): the
conductor hands it to the scheduler on every placement and to the host's claim, which checks the
group again under the host's lock (``berth.domain.host.anti_affinity``).
"""

from __future__ import annotations

import dataclasses
import threading

from berth.conductor.requests import ServerRequest
from berth.scheduler.request.server_group import ServerGroup


class Groups:
    def __init__(self) -> None:
        self.members: dict[str, list[str]] = {}
        self.of: dict[str, str] = {}
        self.lock = threading.Lock()

    def join(self, group: str, instance: str) -> None:
        with self.lock:
            self.members.setdefault(group, []).append(instance)
            self.of[instance] = group

    def attach(self, server: ServerRequest) -> ServerRequest:
        """``server`` with its group's members as they are now (unchanged when it is in none)."""
        with self.lock:
            group = self.of.get(server.instance_uuid)
            if group is None:
                return server
            members = frozenset(self.members[group])
        return dataclasses.replace(server, server_group=ServerGroup(group, "anti-affinity", members))
