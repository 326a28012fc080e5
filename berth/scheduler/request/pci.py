"""PCI devices a flavor asks for: ``pci_passthrough:alias=<alias>:<count>[,<alias>:<count>...]``.

Each alias named (``[pci] alias`` of the scheduler's settings) becomes one PCI request of the host
request, which the compute agent fits on its devices; and, with PCI in Placement, one request group
per device (``resources_pci<r>_<d>=<class>:1``, ``required_pci<r>_<d>=<the alias's traits>``), so that
two devices may come from two providers, as Nova's PCI in Placement asks for them.

``hw:pci_numa_affinity_policy`` (or the image's ``hw_pci_numa_affinity_policy``) overrides every
alias's ``numa_policy``. The host model knows two policies: ``required`` (only devices local to the
guest's cells) and ``preferred`` (local ones first); Nova's ``legacy`` becomes ``required``, and
``socket`` is not supported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from berth.domain.host.request import PciRequest
from berth.scheduler.errors import SpecError
from berth.scheduler.request.flavor import Flavor, Image, SchedulerConfig, hw_values
from berth.scheduler.request.groups import GroupDraft

ALIAS_KEY: Final = "pci_passthrough:alias"
AFFINITY_POLICIES: Final = ("required", "legacy", "preferred", "socket")
HOST_NUMA_POLICY: Final = {"required": "required", "legacy": "required", "preferred": "preferred"}


def pci_suffix(request: int, device: int) -> str:
    return f"_pci{request}_{device}"


@dataclass(frozen=True)
class PciDemand:
    """One ``<alias>:<count>`` of the flavor: what Placement counts, and what the agent fits."""

    alias: str
    device_type: str | None  # recorded from the alias; neither Placement nor the agent checks it
    resource_class: str
    traits: tuple[str, ...]
    request: PciRequest


def pci_demands(flavor: Flavor, image: Image, config: SchedulerConfig) -> tuple[PciDemand, ...]:
    value = flavor.extra_specs.get(ALIAS_KEY)
    if value is None:
        return ()
    policy = _affinity_policy(flavor, image)
    demands = []
    for item in value.split(","):
        name, colon, count_text = (part.strip() for part in item.partition(":"))
        if not colon or not name:
            raise SpecError(ALIAS_KEY, f"{item.strip()!r} is not <alias>:<count>")
        alias = config.pci_aliases.get(name)
        if alias is None:
            known = ", ".join(sorted(config.pci_aliases)) or "none"
            raise SpecError(ALIAS_KEY, f"no PCI alias {name!r} is configured (configured: {known})")
        if not count_text.isdigit() or int(count_text) < 1:
            raise SpecError(ALIAS_KEY, f"{name}: {count_text!r} is not a number of devices (1 or more)")
        resource_class, traits = alias.placement_resource_class, alias.placement_traits
        request = PciRequest(
            count=int(count_text),
            resource_class=resource_class,
            vendor_id=alias.vendor_id,
            product_id=alias.product_id,
            traits=traits,
            numa_policy=HOST_NUMA_POLICY[policy or alias.numa_policy],
        )
        demands.append(PciDemand(name, alias.device_type, resource_class, traits, request))
    return tuple(demands)


def pci_groups(demands: tuple[PciDemand, ...]) -> list[GroupDraft]:
    """One request group per device, each with one unit of the alias's class and its traits."""
    groups = []
    for index, demand in enumerate(demands):
        for device in range(demand.request.count):
            group = GroupDraft(pci_suffix(index, device), pci_request=index)
            group.add_resource(demand.resource_class, 1, ALIAS_KEY)
            for trait in demand.traits:
                group.add_trait(trait, "required", ALIAS_KEY)
            groups.append(group)
    return groups


def _affinity_policy(flavor: Flavor, image: Image) -> str | None:
    flavor_policy, image_policy = hw_values(flavor, image, "pci_numa_affinity_policy")
    for key, value in (("hw:pci_numa_affinity_policy", flavor_policy), ("hw_pci_numa_affinity_policy", image_policy)):
        if value is not None and value not in AFFINITY_POLICIES:
            raise SpecError(key, f"{value!r} is not one of {', '.join(AFFINITY_POLICIES)}")
        if value == "socket":
            raise SpecError(key, "'socket' is not supported: the host model knows NUMA cells, not sockets")
    if flavor_policy is not None and image_policy is not None and flavor_policy != image_policy:
        raise SpecError(
            "hw_pci_numa_affinity_policy", f"the image asks for {image_policy!r}, the flavor for {flavor_policy!r}"
        )
    return flavor_policy or image_policy
