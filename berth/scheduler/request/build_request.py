"""One scheduling call's request as the filters and weighers read it: the request spec, and the
server group with the hosts its members are on (those the call places included, as it goes)."""

from __future__ import annotations

from dataclasses import dataclass, field

from berth.scheduler.request.request_spec import RequestSpec
from berth.scheduler.request.server_group import ServerGroup


@dataclass
class BuildRequest:
    spec: RequestSpec
    group: ServerGroup | None = None
    # Root provider uuids of the hosts holding members of the group, candidates or not.
    group_hosts: set[str] = field(default_factory=set)
    # The instance being placed now.
    instance_uuid: str | None = None
    # Hosts (by name) never chosen, as Nova's ``ignore_hosts``: the source of a move that leaves it.
    ignore_hosts: frozenset[str] = frozenset()
    # The instance a move places: its consumer is the move's migration, not the instance.
    moving_instance: str | None = None

    def consumer_name(self, consumer: str) -> str:
        """How a refusal names what it could not place: a move's instance, not its migration."""
        if self.moving_instance is None:
            return f"instance {consumer}"
        return f"instance {self.moving_instance} (its migration {consumer})"

    def group_policy(self) -> str | None:
        return self.group.policy if self.group is not None else None
