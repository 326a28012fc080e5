"""Provider config files: resources and traits the hardware cannot report by itself.

A licence pool, a shelf of FPGAs wired to the host, a trait saying the host sits in a PCI-DSS zone:
an operator names them in a YAML or TOML file, and the tracker reports them with the rest of the
host.  Each custom resource class carries units and a description for people reading inventories
(the resource model of the extensible-resource-tracking design); Placement itself stores neither.

    meta:
      schema_version: "1.0"
    resource_classes:
      CUSTOM_LICENSE_SEAT: {units: seat, description: Seats of the database licence bound to this host}
    providers:
      - identification: {name: $COMPUTE_NODE}       # the compute node itself
        inventories:
          CUSTOM_LICENSE_SEAT: {total: 4, max_unit: 2}
        traits: [CUSTOM_PCI_DSS]
      - identification: {name: $COMPUTE_NODE_FPGA_SHELF}
        parent: $COMPUTE_NODE                        # a provider the driver does not report: created
        inventories:
          FPGA: {total: 2}

``$COMPUTE_NODE`` stands for the host's name.  A provider the driver reports (the compute node, a NUMA
cell, a PCI device) may gain inventories of classes the driver does not manage, and traits; any other
name creates a child provider under ``parent`` (default: the compute node).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import os_resource_classes
import os_traits

from berth.tracker.drivers.base import Inventory

COMPUTE_NODE = "$COMPUTE_NODE"
SCHEMA_VERSIONS = {"1.0"}
_CUSTOM = re.compile(r"^CUSTOM_[A-Z0-9_]+$")
_INVENTORY_KEYS = {"total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio"}


class ProviderConfigError(ValueError):
    pass


def check_resource_class(name, where) -> str:
    if not isinstance(name, str) or not (_CUSTOM.match(name) or name in os_resource_classes.STANDARDS):
        raise ProviderConfigError(f"{where}: {name!r} is neither a standard resource class nor CUSTOM_*")
    return name


def check_trait(name, where) -> str:
    if not isinstance(name, str) or not (_CUSTOM.match(name) or name in _standard_traits()):
        raise ProviderConfigError(f"{where}: {name!r} is neither a standard trait nor CUSTOM_*")
    return name


_STANDARD_TRAITS: set[str] | None = None


def _standard_traits() -> set[str]:
    global _STANDARD_TRAITS
    if _STANDARD_TRAITS is None:
        _STANDARD_TRAITS = set(os_traits.get_traits())
    return _STANDARD_TRAITS


@dataclass(frozen=True)
class ResourceClassInfo:
    name: str
    units: str = ""
    description: str = ""


@dataclass
class ProviderEntry:
    name: str  # may contain $COMPUTE_NODE
    parent: str | None = None  # only for providers the driver does not report
    inventories: dict[str, Inventory] = field(default_factory=dict)
    traits: set[str] = field(default_factory=set)
    source: str = ""

    def resolved_name(self, host: str) -> str:
        return self.name.replace(COMPUTE_NODE, host)

    def resolved_parent(self, host: str) -> str:
        return (self.parent or COMPUTE_NODE).replace(COMPUTE_NODE, host)


@dataclass
class ProviderConfig:
    resource_classes: dict[str, ResourceClassInfo] = field(default_factory=dict)
    providers: list[ProviderEntry] = field(default_factory=list)

    def merge(self, other: ProviderConfig) -> ProviderConfig:
        classes = dict(self.resource_classes)
        for name, info in other.resource_classes.items():
            if name in classes and classes[name] != info:
                raise ProviderConfigError(f"resource class {name} is described differently in two files")
            classes[name] = info
        names = {p.name for p in self.providers}
        for entry in other.providers:
            if entry.name in names:
                raise ProviderConfigError(f"provider {entry.name} is configured twice ({entry.source})")
        return ProviderConfig(classes, self.providers + other.providers)


def parse_provider_config(data: dict, source: str = "<provider config>") -> ProviderConfig:
    if not isinstance(data, dict):
        raise ProviderConfigError(f"{source}: expected a mapping at the top level")
    unknown = sorted(set(data) - {"meta", "resource_classes", "providers"})
    if unknown:
        raise ProviderConfigError(f"{source}: unknown keys: {', '.join(unknown)}")
    version = str((data.get("meta") or {}).get("schema_version", "1.0"))
    if version not in SCHEMA_VERSIONS:
        raise ProviderConfigError(f"{source}: unsupported schema_version {version}")

    classes = {}
    for name, body in (data.get("resource_classes") or {}).items():
        where = f"{source}: resource_classes.{name}"
        if not isinstance(name, str) or not _CUSTOM.match(name):
            raise ProviderConfigError(f"{where}: only CUSTOM_* classes can be declared")
        body = body or {}
        if not isinstance(body, dict) or set(body) - {"units", "description"}:
            raise ProviderConfigError(f"{where}: expected units and description only")
        classes[name] = ResourceClassInfo(name, str(body.get("units", "")), str(body.get("description", "")))

    providers, seen = [], set()
    for index, item in enumerate(data.get("providers") or []):
        where = f"{source}: providers[{index}]"
        if not isinstance(item, dict):
            raise ProviderConfigError(f"{where}: expected a mapping")
        unknown = sorted(set(item) - {"identification", "parent", "inventories", "traits"})
        if unknown:
            raise ProviderConfigError(f"{where}: unknown keys: {', '.join(unknown)}")
        ident = item.get("identification") or {}
        if (
            not isinstance(ident, dict)
            or set(ident) != {"name"}
            or not isinstance(ident["name"], str)
            or not ident["name"].strip()
        ):
            raise ProviderConfigError(f"{where}: identification must be {{name: ...}}")
        name = ident["name"].strip()
        if name in seen:
            raise ProviderConfigError(f"{where}: provider {name} is configured twice")
        seen.add(name)
        parent = item.get("parent")
        if parent is not None and (not isinstance(parent, str) or not parent.strip()):
            raise ProviderConfigError(f"{where}: parent must be a provider name")
        if parent is not None and name == COMPUTE_NODE:
            raise ProviderConfigError(f"{where}: the compute node has no parent")
        inventories = {}
        for rc, body in (item.get("inventories") or {}).items():
            check_resource_class(rc, f"{where}.inventories")
            if rc.startswith("CUSTOM_") and rc not in classes:
                raise ProviderConfigError(
                    f"{where}.inventories: {rc} is not declared under resource_classes (units, description)"
                )
            inventories[rc] = _inventory(body, f"{where}.inventories.{rc}")
        traits = set()
        for trait in item.get("traits") or []:
            traits.add(check_trait(trait, f"{where}.traits"))
        providers.append(
            ProviderEntry(
                name=name,
                parent=parent.strip() if parent else None,
                inventories=inventories,
                traits=traits,
                source=source,
            )
        )
    return ProviderConfig(classes, providers)


def _inventory(body, where) -> Inventory:
    if isinstance(body, int) and not isinstance(body, bool):
        body = {"total": body}
    if not isinstance(body, dict) or "total" not in body:
        raise ProviderConfigError(f"{where}: expected a total")
    unknown = sorted(set(body) - _INVENTORY_KEYS)
    if unknown:
        raise ProviderConfigError(f"{where}: unknown keys: {', '.join(unknown)}")
    try:
        inventory = Inventory(
            total=int(body["total"]),
            reserved=int(body.get("reserved", 0)),
            min_unit=int(body.get("min_unit", 1)),
            max_unit=int(body["max_unit"]) if body.get("max_unit") is not None else None,
            step_size=int(body.get("step_size", 1)),
            allocation_ratio=float(body.get("allocation_ratio", 1.0)),
        )
    except (TypeError, ValueError):
        raise ProviderConfigError(f"{where}: amounts must be numbers") from None
    if (
        inventory.total < 1
        or inventory.reserved < 0
        or inventory.min_unit < 1
        or inventory.step_size < 1
        or inventory.allocation_ratio <= 0
    ):
        raise ProviderConfigError(f"{where}: total, min_unit and step_size must be positive, reserved not negative")
    if inventory.reserved > inventory.total:
        raise ProviderConfigError(f"{where}: reserved exceeds total")
    if not inventory.min_unit <= inventory.effective_max_unit <= inventory.total:
        raise ProviderConfigError(f"{where}: need min_unit <= max_unit <= total")
    return inventory


def load_provider_config(path) -> ProviderConfig:
    from berth.tracker.config import ConfigError, read_document

    path = Path(path)
    try:
        data = read_document(path)
    except ConfigError as e:
        raise ProviderConfigError(str(e)) from None
    return parse_provider_config(data, str(path))


def load_provider_configs(paths) -> ProviderConfig:
    merged = ProviderConfig()
    for path in paths:
        path = Path(path)
        files = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml", ".toml")) if path.is_dir() else [path]
        for file in files:
            merged = merged.merge(load_provider_config(file))
    return merged
