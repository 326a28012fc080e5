"""A request spec: what one boot request asks of the cloud, as the scheduler works with it.

``build_request_spec`` translates a flavor, its extra specs and an image the way Nova's scheduler
does (docs/scheduler.md has the table); ``RequestSpec.candidates_query`` is the query string of
``GET /allocation_candidates`` at microversion 1.39, and ``RequestSpec.host_request`` the claim
request the compute agent fits on the host it is sent to. Every check is made here, so that a bad
spec raises ``SpecError`` before any query is sent.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from berth.domain.host.errors import InvalidHostRequest
from berth.domain.host.request import Flavor as HostFlavor
from berth.scheduler.errors import SpecError
from berth.scheduler.request.cpu import translate_cpu_policy
from berth.scheduler.request.flavor import Flavor, Image, SchedulerConfig
from berth.scheduler.request.groups import (
    GroupDraft,
    GroupPolicy,
    Groups,
    add_flavor_resources,
    aggregate_extra_specs,
    parse_granular,
    parse_group_policy,
)
from berth.scheduler.request.image import add_image_traits, prefilter_traits
from berth.scheduler.request.numa import PageSize, numa_request, page_size
from berth.scheduler.request.pci import PciDemand, pci_demands, pci_groups
from berth.scheduler.request.priority import preemption_action, priority_of

QUERY_MICROVERSION: Final = "1.39"
DISABLED_TRAIT: Final = "COMPUTE_STATUS_DISABLED"
# The classes the host request carries in fields of their own rather than in ``resources``.
_HOST_FIELD_CLASSES: Final = ("VCPU", "PCPU", "MEMORY_MB", "DISK_GB")


@dataclass(frozen=True)
class RequestGroup:
    """One request group of the candidates query; ``suffix`` "" is the unsuffixed group."""

    suffix: str = ""
    resources: Mapping[str, int] = field(default_factory=dict)
    required: frozenset[str] = frozenset()  # all of them
    any_of: tuple[frozenset[str], ...] = ()  # at least one trait of each set
    forbidden: frozenset[str] = frozenset()
    member_of: tuple[frozenset[str], ...] = ()  # at least one aggregate of each set
    forbidden_aggregates: frozenset[str] = frozenset()
    in_tree: str | None = None
    # The index in ``host_request.pci`` of the PCI request this group is one device of.
    pci_request: int | None = None

    def query(self) -> list[tuple[str, str]]:
        s = self.suffix
        params = []
        if self.resources:
            params.append((f"resources{s}", ",".join(f"{rc}:{n}" for rc, n in sorted(self.resources.items()))))
        traits = sorted(self.required) + [f"!{t}" for t in sorted(self.forbidden)]
        if traits:
            params.append((f"required{s}", ",".join(traits)))
        params += [(f"required{s}", "in:" + ",".join(sorted(any_of))) for any_of in self.any_of]
        params += [(f"member_of{s}", "in:" + ",".join(sorted(aggregates))) for aggregates in self.member_of]
        if self.forbidden_aggregates:
            params.append((f"member_of{s}", "!in:" + ",".join(sorted(self.forbidden_aggregates))))
        if self.in_tree is not None:
            params.append((f"in_tree{s}", self.in_tree))
        return params


@dataclass(frozen=True)
class RequestSpec:
    flavor: Flavor
    image: Image
    groups: tuple[RequestGroup, ...]
    host_request: HostFlavor
    project_id: str
    user_id: str
    num_instances: int = 1
    group_policy: GroupPolicy | None = None
    same_subtree: tuple[tuple[str, ...], ...] = ()
    root_required: frozenset[str] = frozenset()
    root_forbidden: frozenset[str] = frozenset()
    limit: int | None = None
    availability_zone: str | None = None
    # aggregate_instance_extra_specs:<key> -> value, for the aggregate filter.
    aggregate_extra_specs: Mapping[str, str] = field(default_factory=dict)
    # Recorded for the scheduler's own filters: no query parameter and no host field carries it.
    mem_page_size: PageSize | None = None
    # The flavor's PCI aliases, in the order of host_request.pci.
    pci_devices: tuple[PciDemand, ...] = ()
    # The image's id, for the isolated hosts filter (None: no image, or its id is not known).
    image_id: str | None = None
    # The flavor's ``berth:priority`` (``berth.scheduler.request.priority``): what every pick carries, and
    # above 0, a pick that may preempt.
    priority: int = 0

    def candidates_query(self) -> list[tuple[str, str]]:
        """``GET /allocation_candidates`` parameters (microversion 1.39), keys repeated as sent."""
        params = [param for group in self.groups for param in group.query()]
        if self.group_policy is not None:
            params.append(("group_policy", self.group_policy))
        root = sorted(self.root_required) + [f"!{t}" for t in sorted(self.root_forbidden)]
        if root:
            params.append(("root_required", ",".join(root)))
        params += [("same_subtree", ",".join(suffixes)) for suffixes in self.same_subtree]
        if self.limit is not None:
            params.append(("limit", str(self.limit)))
        return params


def build_request_spec(
    flavor: Flavor,
    image: Image | None,
    *,
    num_instances: int = 1,
    availability_zone: str | None = None,
    member_of: Sequence[str | Collection[str]] = (),
    image_id: str | None = None,
    project_id: str,
    user_id: str,
    config: SchedulerConfig,
) -> RequestSpec:
    """The request spec of ``num_instances`` instances of ``flavor`` booted from ``image``.

    ``member_of`` lists aggregates the hosts must be in: each entry one aggregate UUID, or a set of
    them of which the host must be in at least one.
    """
    image = image or Image()
    _check_request(flavor, num_instances, project_id, user_id)
    priority = priority_of(flavor.extra_specs)
    preemption_action(flavor.extra_specs)  # checked here, read by the conductor when it preempts
    groups = parse_granular(flavor.extra_specs)
    add_image_traits(image, groups.unsuffixed)
    dedicated = translate_cpu_policy(flavor, image, groups)
    add_flavor_resources(groups, flavor)
    groups.strip_zeros()
    size = page_size(flavor, image)
    pci = pci_demands(flavor, image, config)
    host_request = _host_request(flavor, image, groups, dedicated=dedicated, page_size=size, pci=pci)
    all_groups = list(groups) + (pci_groups(pci) if config.pci_in_placement else [])
    _check_suffixed(groups, all_groups)
    unsuffixed = _freeze(groups.unsuffixed, _member_of(member_of, availability_zone, config))
    return RequestSpec(
        flavor=flavor,
        image=image,
        groups=(unsuffixed, *(_freeze(g) for g in all_groups if g.suffix)),
        host_request=host_request,
        project_id=project_id,
        user_id=user_id,
        num_instances=num_instances,
        group_policy=_group_policy(flavor, groups, all_groups),
        root_required=prefilter_traits(image) if config.image_metadata_prefilter else frozenset(),
        root_forbidden=frozenset({DISABLED_TRAIT}) if config.exclude_disabled_hosts else frozenset(),
        limit=config.max_placement_results,
        availability_zone=availability_zone,
        aggregate_extra_specs=aggregate_extra_specs(flavor.extra_specs),
        mem_page_size=size,
        pci_devices=pci,
        image_id=image_id,
        priority=priority,
    )


def _check_request(flavor: Flavor, num_instances: int, project_id: str, user_id: str) -> None:
    for name, value, least in (
        ("vcpus", flavor.vcpus, 1),
        ("memory_mb", flavor.memory_mb, 1),
        ("root_gb", flavor.root_gb, 0),
        ("ephemeral_gb", flavor.ephemeral_gb, 0),
        ("swap_mb", flavor.swap_mb, 0),
        ("num_instances", num_instances, 1),
    ):
        if value < least:
            raise SpecError(name, f"{value} is less than {least}")
    for name, text in (("project_id", project_id), ("user_id", user_id)):
        if not text:
            raise SpecError(name, "is empty")


def _host_request(
    flavor: Flavor,
    image: Image,
    groups: Groups,
    *,
    dedicated: bool,
    page_size: PageSize | None,
    pci: tuple[PciDemand, ...],
) -> HostFlavor:
    """The claim the agent fits: the amounts asked of Placement, with the topology and devices."""
    amounts = groups.merged_resources()
    cpu_class = "PCPU" if dedicated else "VCPU"
    for rc, what in ((cpu_class, "vCPU"), ("MEMORY_MB", "MB of memory")):
        if amounts[rc] < 1:
            raise SpecError(groups.key_of(rc) or rc, f"the compute agent claims at least one {what} for an instance")
    overrides = {
        rc: groups.key_of(rc) or rc
        for rc, own in ((cpu_class, flavor.vcpus), ("MEMORY_MB", flavor.memory_mb))
        if amounts[rc] != own
    }
    host = HostFlavor(
        name=flavor.name,
        vcpus=amounts[cpu_class],
        memory_mb=amounts["MEMORY_MB"],
        disk_gb=amounts["DISK_GB"],
        cpu_policy="dedicated" if dedicated else "shared",
        numa=numa_request(flavor, image, dedicated=dedicated, page_size=page_size, overrides=overrides),
        pci=tuple(demand.request for demand in pci),
        resources={rc: n for rc, n in sorted(amounts.items()) if rc not in _HOST_FIELD_CLASSES and n},
    )
    try:
        host.validate()
    except InvalidHostRequest as e:
        raise SpecError("flavor", f"the compute agent would refuse it: {e.message}") from None
    return host


def _check_suffixed(flavor_groups: Groups, all_groups: list[GroupDraft]) -> None:
    """Placement takes a suffixed group without resources only inside a same_subtree, which a
    flavor cannot give; and a flavor's suffix may not be one the PCI groups use."""
    for group in flavor_groups.suffixed():
        if not group.resources:
            raise SpecError(
                next(key for name, key in group.keys.items() if name in group.required | group.forbidden),
                f"request group {group.suffix!r} asks for traits but no resources (resources{group.suffix}:...)",
            )
    flavor_suffixes = {g.suffix for g in flavor_groups.suffixed()}
    for group in all_groups:
        if group.pci_request is not None and group.suffix in flavor_suffixes:
            raise SpecError(
                next(iter(flavor_groups.group(group.suffix).keys.values())),
                f"the suffix {group.suffix!r} is the one of a PCI device's request group",
            )


def _group_policy(flavor: Flavor, flavor_groups: Groups, all_groups: list[GroupDraft]) -> GroupPolicy | None:
    """Placement needs a policy as soon as two suffixed groups ask for resources; when at most one of
    them is the flavor's own (the others a PCI device's), ``none`` is the default, as in Nova."""
    policy = parse_group_policy(flavor.extra_specs)
    suffixed = [g for g in all_groups if g.suffix and g.resources]
    if policy is not None or len(suffixed) < 2:
        return policy
    own = sorted(g.suffix for g in flavor_groups.suffixed())
    if len(own) > 1:
        raise SpecError(
            "group_policy", f"needed ('none' or 'isolate'): the flavor has {len(own)} request groups ({', '.join(own)})"
        )
    return "none"


def _member_of(
    member_of: Sequence[str | Collection[str]], availability_zone: str | None, config: SchedulerConfig
) -> tuple[frozenset[str], ...]:
    """Each any-of set of aggregates, the zone's aggregates last."""
    sets = []
    for entry in member_of:
        aggregates = frozenset({entry} if isinstance(entry, str) else entry)
        if not aggregates:
            raise SpecError("member_of", "an empty set of aggregates")
        for aggregate in aggregates:
            try:
                uuid.UUID(aggregate)
            except ValueError:
                raise SpecError("member_of", f"{aggregate!r} is not an aggregate UUID") from None
        sets.append(aggregates)
    zone_aggregates = config.availability_zones.get(availability_zone) if availability_zone else None
    if zone_aggregates:
        sets.append(frozenset(zone_aggregates))
    return tuple(sets)


def _freeze(draft: GroupDraft, member_of: tuple[frozenset[str], ...] = ()) -> RequestGroup:
    return RequestGroup(
        suffix=draft.suffix,
        resources=dict(draft.resources),
        required=frozenset(draft.required),
        forbidden=frozenset(draft.forbidden),
        member_of=member_of,
        pci_request=draft.pci_request,
    )
