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

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import os_resource_classes
import os_traits

from berth.domain.capacity import Inventory
from berth.tracker.configuration.documents import read_document
from berth.tracker.errors import ConfigError, ProviderConfigError

COMPUTE_NODE = "$COMPUTE_NODE"
SCHEMA_VERSIONS = {"1.0"}
_CUSTOM = re.compile(r"^CUSTOM_[A-Z0-9_]+$")
_TOP_KEYS = {"meta", "resource_classes", "providers"}
_PROVIDER_KEYS = {"identification", "parent", "inventories", "traits"}
_INVENTORY_KEYS = {"total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio"}


def check_resource_class(name: object, where: str) -> str:
    if not isinstance(name, str) or not (_CUSTOM.match(name) or name in os_resource_classes.STANDARDS):
        raise ProviderConfigError(f"{where}: {name!r} is neither a standard resource class nor CUSTOM_*")
    return name


def check_trait(name: object, where: str) -> str:
    if not isinstance(name, str) or not (_CUSTOM.match(name) or name in _standard_traits()):
        raise ProviderConfigError(f"{where}: {name!r} is neither a standard trait nor CUSTOM_*")
    return name


@functools.cache
def _standard_traits() -> frozenset[str]:
    return frozenset(os_traits.get_traits())


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


def parse_provider_config(data: object, source: str = "<provider config>") -> ProviderConfig:
    """One provider config document, checked key by key; errors name the file and the key."""
    if not isinstance(data, dict):
        raise ProviderConfigError(f"{source}: expected a mapping at the top level")
    _no_unknown_keys(data, _TOP_KEYS, source)
    _check_schema_version(data.get("meta"), source)
    classes = _declared_classes(data.get("resource_classes") or {}, source)
    providers: list[ProviderEntry] = []
    for index, item in enumerate(data.get("providers") or []):
        entry = _provider_entry(item, classes, f"{source}: providers[{index}]", source)
        if any(p.name == entry.name for p in providers):
            raise ProviderConfigError(f"{source}: providers[{index}]: provider {entry.name} is configured twice")
        providers.append(entry)
    return ProviderConfig(classes, providers)


def _no_unknown_keys(mapping: dict[Any, Any], known: set[str], where: str) -> None:
    unknown = sorted(str(k) for k in set(mapping) - known)
    if unknown:
        raise ProviderConfigError(f"{where}: unknown keys: {', '.join(unknown)}")


def _check_schema_version(meta: object, source: str) -> None:
    version = str(meta.get("schema_version", "1.0")) if isinstance(meta, dict) else "1.0"
    if version not in SCHEMA_VERSIONS:
        raise ProviderConfigError(f"{source}: unsupported schema_version {version}")


def _declared_classes(section: object, source: str) -> dict[str, ResourceClassInfo]:
    """Custom resource classes with their units and description: only CUSTOM_* may be declared."""
    if not isinstance(section, dict):
        raise ProviderConfigError(f"{source}: resource_classes: expected a mapping")
    classes = {}
    for name, body in section.items():
        where = f"{source}: resource_classes.{name}"
        if not isinstance(name, str) or not _CUSTOM.match(name):
            raise ProviderConfigError(f"{where}: only CUSTOM_* classes can be declared")
        body = body or {}
        if not isinstance(body, dict) or set(body) - {"units", "description"}:
            raise ProviderConfigError(f"{where}: expected units and description only")
        classes[name] = ResourceClassInfo(name, str(body.get("units", "")), str(body.get("description", "")))
    return classes


def _provider_entry(item: object, classes: dict[str, ResourceClassInfo], where: str, source: str) -> ProviderEntry:
    if not isinstance(item, dict):
        raise ProviderConfigError(f"{where}: expected a mapping")
    _no_unknown_keys(item, _PROVIDER_KEYS, where)
    name = _identified_name(item.get("identification"), where)
    return ProviderEntry(
        name=name,
        parent=_parent_name(item.get("parent"), name, where),
        inventories={
            rc: _inventory(body, f"{where}.inventories.{rc}")
            for rc, body in _inventory_section(item.get("inventories"), classes, where).items()
        },
        traits={check_trait(trait, f"{where}.traits") for trait in item.get("traits") or []},
        source=source,
    )


def _identified_name(identification: object, where: str) -> str:
    """A provider is identified by its name alone."""
    if not isinstance(identification, dict) or set(identification) != {"name"}:
        raise ProviderConfigError(f"{where}: identification must be {{name: ...}}")
    name = identification["name"]
    if not isinstance(name, str) or not name.strip():
        raise ProviderConfigError(f"{where}: identification must be {{name: ...}}")
    return name.strip()


def _parent_name(parent: object, name: str, where: str) -> str | None:
    if parent is None:
        return None
    if not isinstance(parent, str) or not parent.strip():
        raise ProviderConfigError(f"{where}: parent must be a provider name")
    if name == COMPUTE_NODE:
        raise ProviderConfigError(f"{where}: the compute node has no parent")
    return parent.strip()


def _inventory_section(section: object, classes: dict[str, ResourceClassInfo], where: str) -> dict[str, object]:
    """Inventories by class: a custom class must be declared under resource_classes."""
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise ProviderConfigError(f"{where}.inventories: expected a mapping")
    for rc in section:
        check_resource_class(rc, f"{where}.inventories")
        if rc.startswith("CUSTOM_") and rc not in classes:
            raise ProviderConfigError(
                f"{where}.inventories: {rc} is not declared under resource_classes (units, description)"
            )
    return section


def _inventory(body: object, where: str) -> Inventory:
    """An inventory from a total, or from its fields; max_unit defaults to the total."""
    if isinstance(body, int) and not isinstance(body, bool):
        body = {"total": body}
    if not isinstance(body, dict) or "total" not in body:
        raise ProviderConfigError(f"{where}: expected a total")
    _no_unknown_keys(body, _INVENTORY_KEYS, where)
    try:
        total = int(body["total"])
        inventory = Inventory(
            total=total,
            reserved=int(body.get("reserved", 0)),
            min_unit=int(body.get("min_unit", 1)),
            max_unit=int(body["max_unit"]) if body.get("max_unit") is not None else total,
            step_size=int(body.get("step_size", 1)),
            allocation_ratio=float(body.get("allocation_ratio", 1.0)),
        )
    except (TypeError, ValueError):
        raise ProviderConfigError(f"{where}: amounts must be numbers") from None
    _check_inventory(inventory, where)
    return inventory


def _check_inventory(inventory: Inventory, where: str) -> None:
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
    if not inventory.min_unit <= inventory.max_unit <= inventory.total:
        raise ProviderConfigError(f"{where}: need min_unit <= max_unit <= total")


def load_provider_config(path: str | Path) -> ProviderConfig:
    path = Path(path)
    try:
        data = read_document(path)
    except ConfigError as e:
        raise ProviderConfigError(str(e)) from None
    return parse_provider_config(data, str(path))


def load_provider_configs(paths: Iterable[str | Path]) -> ProviderConfig:
    """Files and folders of files (``.yaml``, ``.yml``, ``.toml``), merged in name order."""
    merged = ProviderConfig()
    for path in map(Path, paths):
        files = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml", ".toml")) if path.is_dir() else [path]
        for file in files:
            merged = merged.merge(load_provider_config(file))
    return merged
