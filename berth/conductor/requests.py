"""What an operation is asked, and what it chose, as the journal keeps them (JSON)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from berth.domain.host.anti_affinity import AntiAffinity
from berth.domain.host.request import InstanceSpec
from berth.scheduler.hosts.candidates import AllocationRequest
from berth.scheduler.request.flavor import Flavor, Image, SchedulerConfig
from berth.scheduler.request.request_spec import RequestSpec, build_request_spec
from berth.scheduler.request.server_group import ServerGroup
from berth.scheduler.selection import Destination, Selection


def flavor_to_dict(flavor: Flavor) -> dict[str, Any]:
    return {
        "name": flavor.name,
        "vcpus": flavor.vcpus,
        "memory_mb": flavor.memory_mb,
        "root_gb": flavor.root_gb,
        "ephemeral_gb": flavor.ephemeral_gb,
        "swap_mb": flavor.swap_mb,
        "extra_specs": dict(flavor.extra_specs),
    }


def server_group_to_dict(group: ServerGroup) -> dict[str, Any]:
    return {
        "uuid": group.uuid,
        "policy": group.policy,
        "members": sorted(group.members),
        "max_server_per_host": group.max_server_per_host,
    }


def server_group_from_dict(d: dict[str, Any]) -> ServerGroup:
    return ServerGroup(
        str(d["uuid"]),
        d["policy"],
        frozenset(str(m) for m in d.get("members") or ()),
        int(d.get("max_server_per_host", 1)),
    )


def flavor_from_dict(d: dict[str, Any]) -> Flavor:
    return Flavor(
        str(d["name"]),
        int(d["vcpus"]),
        int(d["memory_mb"]),
        root_gb=int(d.get("root_gb", 0)),
        ephemeral_gb=int(d.get("ephemeral_gb", 0)),
        swap_mb=int(d.get("swap_mb", 0)),
        extra_specs={str(k): str(v) for k, v in (d.get("extra_specs") or {}).items()},
    )


@dataclass(frozen=True)
class ServerRequest:
    """One server as a user asks for it: the scheduler's flavor and image, and who owns it."""

    instance_uuid: str
    flavor: Flavor
    project_id: str
    user_id: str
    image: Image = field(default_factory=Image)
    availability_zone: str | None = None
    # The server group the instance is a member of, as the caller knows it now: its policy reaches
    # the scheduler on every placement (the group's filters or weighers, or the service's pick,
    # apply it), and an anti-affinity group the host's claim too (``anti_affinity``).
    server_group: ServerGroup | None = None
    # What its owner calls it (servers are known by their uuid everywhere else).
    name: str = ""
    # Its owner's key-value pairs (Nova's server metadata): kept and shown, read by nobody else.
    metadata: Mapping[str, str] = field(default_factory=dict)

    def spec(self, config: SchedulerConfig) -> RequestSpec:
        return build_request_spec(
            self.flavor,
            self.image,
            availability_zone=self.availability_zone,
            project_id=self.project_id,
            user_id=self.user_id,
            config=config,
        )

    def instance(self, config: SchedulerConfig) -> InstanceSpec:
        """What the host's agent claims: the spec's host request."""
        return InstanceSpec(
            self.instance_uuid, self.spec(config).host_request, self.project_id, self.user_id, self.anti_affinity()
        )

    def anti_affinity(self) -> AntiAffinity | None:
        """The rule the host's claim checks again, when the group is an anti-affinity one."""
        group = self.server_group
        if group is None or group.policy != "anti-affinity":
            return None
        return AntiAffinity(group.uuid, group.members, group.max_server_per_host)

    def group_for_move(self) -> ServerGroup | None:
        """The group as a move of this instance schedules with: the instance itself does not keep
        itself off a host (where it is now counts for the others only)."""
        group = self.server_group
        return None if group is None else replace(group, members=group.members - {self.instance_uuid})

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance_uuid": self.instance_uuid,
            "flavor": flavor_to_dict(self.flavor),
            "project_id": self.project_id,
            "user_id": self.user_id,
            "image": dict(self.image.properties),
            "availability_zone": self.availability_zone,
            "server_group": server_group_to_dict(self.server_group) if self.server_group else None,
            "name": self.name,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ServerRequest:
        return cls(
            str(d["instance_uuid"]),
            flavor_from_dict(d["flavor"]),
            str(d["project_id"]),
            str(d["user_id"]),
            Image({str(k): str(v) for k, v in (d.get("image") or {}).items()}),
            d.get("availability_zone"),
            server_group_from_dict(d["server_group"]) if d.get("server_group") else None,
            str(d.get("name") or ""),
            {str(k): str(v) for k, v in (d.get("metadata") or {}).items()},
        )


def destination_to_dict(destination: Destination) -> dict[str, Any]:
    return {
        "host": destination.host,
        "root_provider_uuid": destination.root_provider_uuid,
        "allocation_request": destination.allocation_request.to_dict(),
    }


def destination_from_dict(d: dict[str, Any]) -> Destination:
    return Destination(
        str(d["host"]), str(d["root_provider_uuid"]), AllocationRequest.from_dict(d["allocation_request"])
    )


def destinations_of(selection: Selection) -> list[dict[str, Any]]:
    """The claimed destination first, then the alternates, in the scheduler's order."""
    return [destination_to_dict(d) for d in (selection.destination, *selection.alternates)]
