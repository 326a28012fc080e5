"""What a request spec is built from: a flavor with its extra specs, an image with its properties,
and the scheduler's settings the translation needs (PCI aliases, availability zones' aggregates,
whether disabled hosts are left out, the candidate limit).

PCI aliases are given as Nova's ``[pci] alias`` entries give them, one JSON object each::

    {"name": "fast-nic", "resource_class": "CUSTOM_NIC_X710", "traits": "CUSTOM_FAST",
     "numa_policy": "required", "device_type": "type-PF"}
    {"name": "qat", "vendor_id": "8086", "product_id": "0443"}

Each alias names one device spec, and asks Placement for its ``resource_class``, or, without one,
for the class the compute agent reports such devices under (``CUSTOM_PCI_<VENDOR>_<PRODUCT>``).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import jsonschema
import orjson

from berth.scheduler.errors import ConfigError
from berth.scheduler.request.names import normalize_resource_class, normalize_trait


@dataclass(frozen=True)
class Flavor:
    name: str
    vcpus: int
    memory_mb: int
    root_gb: int = 0
    ephemeral_gb: int = 0
    swap_mb: int = 0
    extra_specs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Image:
    properties: Mapping[str, str] = field(default_factory=dict)


def hw_values(flavor: Flavor, image: Image, name: str) -> tuple[str | None, str | None]:
    """The flavor's ``hw:<name>`` extra spec and the image's ``hw_<name>`` property."""
    return flavor.extra_specs.get(f"hw:{name}"), image.properties.get(f"hw_{name}")


# --- PCI aliases ------------------------------------------------------------------------------

DEVICE_TYPES: Final = ("type-PCI", "type-PF", "type-VF")
# Nova's "socket" policy needs the host's sockets, which the host model does not know.
ALIAS_NUMA_POLICIES: Final = ("required", "legacy", "preferred")

_PCI_ID: Final = "^[0-9a-fA-F]{4}$"
_ALIAS_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 256},
        "capability_type": {"type": "string", "enum": ["pci"]},
        "vendor_id": {"type": "string", "pattern": _PCI_ID},
        "product_id": {"type": "string", "pattern": _PCI_ID},
        "device_type": {"type": "string", "enum": list(DEVICE_TYPES)},
        "numa_policy": {"type": "string", "enum": [*ALIAS_NUMA_POLICIES, "socket"]},
        "resource_class": {"type": "string", "minLength": 1},
        "traits": {"type": "string"},
        "live_migratable": {"type": "string"},
    },
}


@dataclass(frozen=True)
class PciAlias:
    """One ``[pci] alias`` entry: which devices a flavor's ``pci_passthrough:alias`` names."""

    name: str
    resource_class: str | None = None
    vendor_id: str | None = None
    product_id: str | None = None
    traits: tuple[str, ...] = ()
    numa_policy: str = "legacy"
    device_type: str | None = None

    def __post_init__(self) -> None:
        if self.resource_class is None and (self.vendor_id is None or self.product_id is None):
            raise ConfigError(f"PCI alias {self.name!r}: needs a resource_class, or a vendor_id and a product_id")
        if self.numa_policy not in ALIAS_NUMA_POLICIES:
            raise ConfigError(
                f"PCI alias {self.name!r}: numa_policy {self.numa_policy!r} is not supported; "
                f"use one of {', '.join(ALIAS_NUMA_POLICIES)}"
            )
        if self.device_type is not None and self.device_type not in DEVICE_TYPES:
            raise ConfigError(f"PCI alias {self.name!r}: device_type is one of {', '.join(DEVICE_TYPES)}")

    @property
    def placement_resource_class(self) -> str:
        """The class its devices are counted under in Placement."""
        if self.resource_class is not None:
            return normalize_resource_class(self.resource_class)
        return f"CUSTOM_PCI_{self.vendor_id}_{self.product_id}".upper()

    @property
    def placement_traits(self) -> tuple[str, ...]:
        return tuple(sorted({normalize_trait(t) for t in self.traits}))

    @classmethod
    def from_json(cls, text: str) -> PciAlias:
        try:
            entry = orjson.loads(text)
            jsonschema.validate(entry, _ALIAS_SCHEMA)
        except orjson.JSONDecodeError as e:
            raise ConfigError(f"PCI alias {text!r}: not JSON: {e}") from None
        except jsonschema.ValidationError as e:
            raise ConfigError(f"PCI alias {text!r}: {e.message}") from None
        traits = tuple(t.strip() for t in entry.get("traits", "").split(",") if t.strip())
        return cls(
            name=entry["name"].strip(),
            resource_class=entry.get("resource_class"),
            vendor_id=entry.get("vendor_id"),
            product_id=entry.get("product_id"),
            traits=traits,
            numa_policy=entry.get("numa_policy") or "legacy",
            device_type=entry.get("device_type"),
        )


def parse_pci_aliases(entries: Iterable[str]) -> dict[str, PciAlias]:
    """``[pci] alias`` entries by name; one device spec per alias, as PCI in Placement requires."""
    aliases: dict[str, PciAlias] = {}
    for text in entries:
        alias = PciAlias.from_json(text)
        if alias.name in aliases:
            raise ConfigError(f"PCI alias {alias.name!r} is defined twice; an alias names one device spec")
        aliases[alias.name] = alias
    return aliases


# --- settings ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SchedulerConfig:
    pci_aliases: Mapping[str, PciAlias] = field(default_factory=dict)
    # Ask Placement for each PCI device (one request group per device); the compute agent reports
    # every passthrough device as a provider, so this is on unless devices are left to the agent.
    pci_in_placement: bool = True
    # Leave out hosts whose compute node carries COMPUTE_STATUS_DISABLED.
    exclude_disabled_hosts: bool = True
    # Availability zone -> the aggregates that make it up (those whose metadata names the zone).
    availability_zones: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # The candidates' ``limit``; None asks for every candidate.
    max_placement_results: int | None = 1000
    # Require the traits that hw_architecture, hw_disk_bus, hw_vif_model ... of the image name.
    image_metadata_prefilter: bool = False
    # The hosts whose agents stopped beating, as the conductors know them (a live collection): Nova's
    # ComputeFilter leaves out a compute service that is down.
    hosts_down: Collection[str] = frozenset()
    # Compute nodes no agent registered for (a conductor could not ask them to build): never
    # chosen, whatever the filters, as Nova schedules only to its compute services' nodes.
    unknown_hosts: Collection[str] = frozenset()

    def __post_init__(self) -> None:
        for name, alias in self.pci_aliases.items():
            if name != alias.name:
                raise ConfigError(f"pci_aliases: alias {alias.name!r} is filed under {name!r}")
        for zone, aggregates in self.availability_zones.items():
            if not aggregates or not all(_is_uuid(a) for a in aggregates):
                raise ConfigError(f"availability_zones: zone {zone!r} needs one or more aggregate UUIDs")
        if self.max_placement_results is not None and self.max_placement_results < 1:
            raise ConfigError("max_placement_results: at least 1, or None for no limit")


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True
