"""How the scheduler chooses among the hosts Placement offers: its filters, its weighers and what
they read from configuration (Nova's ``[filter_scheduler]`` options, under the same names).

The request spec's own settings (PCI aliases, the zones' aggregates, the candidate limit) are
``berth.scheduler.request.flavor.SchedulerConfig``; these are the ones the choice among candidates needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from berth.domain.weighing import MULTIPLIER_NAMES, POLICY_MULTIPLIERS, Multipliers, WeighPolicy, multipliers_for
from berth.scheduler.errors import ConfigError

# Every filter by name, in the order they run by default: those that read only what Placement
# answered first, those that ask each host's agent last (they always run last, on the ranked hosts,
# only as far as the claims walk them: ``berth.scheduler.hosts.ranked``).
FILTER_NAMES: Final = (
    "ComputeFilter",
    "AvailabilityZoneFilter",
    "AggregateInstanceExtraSpecsFilter",
    "IsolatedHostsFilter",
    "ServerGroupAntiAffinityFilter",
    "ServerGroupAffinityFilter",
    "NUMATopologyFilter",
    "PciPassthroughFilter",
)
WEIGHER_NAMES: Final = (
    "RAMWeigher",
    "CPUWeigher",
    "DiskWeigher",
    "NumInstancesWeigher",
    "ServerGroupSoftAffinityWeigher",
    "ServerGroupSoftAntiAffinityWeigher",
)


@dataclass(frozen=True)
class SelectionSettings:
    enabled_filters: tuple[str, ...] = FILTER_NAMES
    weighers: tuple[str, ...] = WEIGHER_NAMES
    # ``spread`` (Nova's defaults: prefer the host with most free) or ``pack`` (the resource
    # weighers turned round); ``multipliers`` overrides single multipliers of the policy's, by the
    # names of berth.domain.weighing.Multipliers (ram, cpu, disk, instances, soft_affinity,
    # soft_anti_affinity).
    weigh_policy: WeighPolicy = "spread"
    multipliers: Mapping[str, float] = field(default_factory=dict)
    # Aggregate uuid -> its metadata: read by AggregateInstanceExtraSpecsFilter, and by the
    # weighers, which take ``<name>_weight_multiplier`` from it (the lowest of a host's aggregates)
    # over the configured multiplier.
    aggregate_metadata: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # The zone of a host in none of the configured zones' aggregates.
    default_availability_zone: str = "nova"
    isolated_hosts: frozenset[str] = frozenset()
    isolated_images: frozenset[str] = frozenset()
    restrict_isolated_hosts_to_isolated_images: bool = True
    # The chosen host is drawn at random from this many best ones (1: always the best).
    host_subset_size: int = 1
    # Use the service's pick-and-claim when it offers it and nothing needs the scheduler's side.
    use_pick_extension: bool = True

    def __post_init__(self) -> None:
        for kind, names, known in (
            ("enabled_filters", self.enabled_filters, FILTER_NAMES),
            ("weighers", self.weighers, WEIGHER_NAMES),
        ):
            unknown = sorted(set(names) - set(known))
            if unknown:
                raise ConfigError(f"{kind}: unknown {', '.join(unknown)}; known: {', '.join(known)}")
            if len(set(names)) != len(names):
                raise ConfigError(f"{kind}: a name is given twice")
        if self.weigh_policy not in POLICY_MULTIPLIERS:
            raise ConfigError(f"weigh_policy: one of {', '.join(sorted(POLICY_MULTIPLIERS))}")
        unknown = sorted(set(self.multipliers) - set(MULTIPLIER_NAMES))
        if unknown:
            raise ConfigError(f"multipliers: unknown {', '.join(unknown)}; known: {', '.join(MULTIPLIER_NAMES)}")
        if self.host_subset_size < 1:
            raise ConfigError("host_subset_size: at least 1")

    @property
    def base_multipliers(self) -> Multipliers:
        """The policy's multipliers with the configured ones over them."""
        return multipliers_for(self.weigh_policy, {k: float(v) for k, v in self.multipliers.items()})

    def aggregates_with_metadata(self) -> frozenset[str]:
        return frozenset(self.aggregate_metadata)
