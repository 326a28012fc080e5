"""The tracker's configuration: host reservations, allocation ratios, CPU sets, PCI devices, storage.

One YAML (``.yaml``/``.yml``) or TOML (``.toml``) file, every key optional::

    reserved:             {VCPU: 0, MEMORY_MB: 512, DISK_GB: 0}
    allocation_ratios:    {VCPU: 4.0, MEMORY_MB: 1.0, DISK_GB: 1.0}
    cpu_dedicated_set:    "4-7"          # pinned CPUs, reported as PCPU
    cpu_shared_set:       "0-3"          # floating CPUs, reported as VCPU (default: all the others)
    instances_path:       /var/lib/berth/instances
    state_dir:            /var/lib/berth/agent
    pci_device_spec:
      - {vendor_id: "8086", product_id: "1572", resource_class: CUSTOM_NIC_X710, traits: [CUSTOM_FAST]}
    shared_storage:       {provider_uuid: ..., aggregate_uuid: ...}
    provider_config:      [extra-resources.yaml]        # see berth.tracker.configuration.provider_config
    audit:                {interval: 60, heal: false, orphan_grace_seconds: 300, reclaim_instance_interval: 0}
    agent:                {bind: "127.0.0.1:8779", token: null}
    fake:                 {...}                          # the fake driver's topology

Unknown keys are errors: a misspelt reservation silently ignored is an over-committed host.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from fnmatch import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

from berth.tracker.configuration.documents import read_document
from berth.tracker.configuration.provider_config import (
    ProviderConfig,
    check_resource_class,
    check_trait,
    load_provider_configs,
)
from berth.tracker.errors import ConfigError
from berth.tracker.facts import PciDevice

__all__ = ["ConfigError", "TrackerConfig", "format_cpu_set", "parse_cpu_set"]

DEFAULT_RESERVED = {"MEMORY_MB": 512}
DEFAULT_RATIOS = {"VCPU": 4.0, "MEMORY_MB": 1.0, "DISK_GB": 1.0}
if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_Section = TypeVar("_Section", bound="DataclassInstance")


@overload
def parse_cpu_set(text: None) -> None: ...
@overload
def parse_cpu_set(text: str | int) -> frozenset[int]: ...
def parse_cpu_set(text: str | int | None) -> frozenset[int] | None:
    """``"0-3,8,^2"`` -> {0, 1, 3, 8}; None stays None."""
    if text is None:
        return None
    if isinstance(text, int):
        return frozenset({text})
    include: set[int] = set()
    exclude: set[int] = set()
    for part in str(text).replace(" ", "").split(","):
        if not part:
            continue
        target = exclude if part.startswith("^") else include
        part = part.lstrip("^")
        try:
            if "-" in part:
                low, high = (int(x) for x in part.split("-", 1))
                if low > high:
                    raise ValueError
                target.update(range(low, high + 1))
            else:
                target.add(int(part))
        except ValueError:
            raise ConfigError(f"invalid CPU set {text!r}") from None
    return frozenset(include - exclude)


def format_cpu_set(cpus: Iterable[int]) -> str:
    ordered = sorted(cpus)
    ranges: list[str] = []
    start: int | None = None
    for i, cpu in enumerate(ordered):
        if start is None:
            start = cpu
        if i + 1 == len(ordered) or ordered[i + 1] != cpu + 1:
            ranges.append(str(start) if start == cpu else f"{start}-{cpu}")
            start = None
    return ",".join(ranges)


@dataclass(frozen=True)
class PciDeviceSpec:
    """Which PCI devices (or physical functions) may be given to guests, and as what."""

    vendor_id: str | None = None
    product_id: str | None = None
    address: str | None = None  # exact address, or a glob such as "0000:81:*"
    resource_class: str | None = None  # default CUSTOM_PCI_<VENDOR>_<PRODUCT>, SRIOV_NET_VF for PFs with VFs
    traits: tuple[str, ...] = ()

    def matches(self, device: PciDevice) -> bool:
        if self.vendor_id and self.vendor_id != device.vendor_id:
            return False
        if self.product_id and self.product_id != device.product_id:
            return False
        return not (self.address and not fnmatch(device.address, self.address))


@dataclass(frozen=True)
class SharedStorage:
    """A sharing provider (``MISC_SHARES_VIA_AGGREGATE``) that holds this host's DISK_GB."""

    provider_uuid: str
    aggregate_uuid: str | None = None  # joined by the compute node so that Placement sees the sharing


@dataclass(frozen=True)
class AuditConfig:
    interval: float = 60.0
    heal: bool = False
    orphan_grace_seconds: float = 300.0
    reclaim_instance_interval: float = 0.0  # 0: soft-deleted instances are kept until deleted


@dataclass(frozen=True)
class AgentConfig:
    bind: str = "127.0.0.1:8779"
    token: str | None = None


@dataclass
class TrackerConfig:
    reserved: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_RESERVED))
    allocation_ratios: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_RATIOS))
    cpu_dedicated_set: frozenset[int] | None = None
    cpu_shared_set: frozenset[int] | None = None
    instances_path: str = "/var/lib/berth/instances"
    state_dir: str = "/var/lib/berth/agent"
    pci_device_spec: tuple[PciDeviceSpec, ...] = ()
    shared_storage: SharedStorage | None = None
    provider_config: ProviderConfig | None = None
    audit: AuditConfig = field(default_factory=AuditConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    fake: dict[str, Any] = field(default_factory=dict)

    def ratio(self, resource_class: str) -> float:
        return float(self.allocation_ratios.get(resource_class, 1.0))

    def reserved_of(self, resource_class: str) -> int:
        return int(self.reserved.get(resource_class, 0))

    def store_path(self, host: str) -> str:
        return os.path.join(self.state_dir, f"{host}.sqlite")

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, *, base_dir: str | None = None) -> TrackerConfig:
        data = dict(data or {})
        known = {
            "reserved",
            "allocation_ratios",
            "cpu_dedicated_set",
            "cpu_shared_set",
            "instances_path",
            "state_dir",
            "pci_device_spec",
            "shared_storage",
            "provider_config",
            "audit",
            "agent",
            "fake",
        }
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown configuration keys: {', '.join(unknown)}")
        config = cls()
        if "reserved" in data:
            config.reserved = _amounts(data["reserved"], "reserved", int)
        if "allocation_ratios" in data:
            ratios = dict(DEFAULT_RATIOS)
            ratios.update(_amounts(data["allocation_ratios"], "allocation_ratios", float))
            config.allocation_ratios = ratios
        config.cpu_dedicated_set = parse_cpu_set(data.get("cpu_dedicated_set"))
        config.cpu_shared_set = parse_cpu_set(data.get("cpu_shared_set"))
        if config.cpu_dedicated_set and config.cpu_shared_set and config.cpu_dedicated_set & config.cpu_shared_set:
            raise ConfigError(
                "cpu_dedicated_set and cpu_shared_set overlap: "
                + format_cpu_set(config.cpu_dedicated_set & config.cpu_shared_set)
            )
        for key in ("instances_path", "state_dir"):
            if key in data:
                setattr(config, key, _path(data[key], base_dir))
        config.pci_device_spec = tuple(_pci_spec(item, i) for i, item in enumerate(data.get("pci_device_spec") or []))
        if data.get("shared_storage"):
            config.shared_storage = _section(SharedStorage, data["shared_storage"], "shared_storage")
        if "audit" in data:
            config.audit = _section(AuditConfig, data["audit"], "audit")
        if "agent" in data:
            config.agent = _section(AgentConfig, data["agent"], "agent")
        if "fake" in data:
            if not isinstance(data["fake"], dict):
                raise ConfigError("fake: expected a mapping")
            config.fake = dict(data["fake"])
        if data.get("provider_config"):
            paths = data["provider_config"]
            paths = [paths] if isinstance(paths, str) else list(paths)
            config.provider_config = load_provider_configs([_path(p, base_dir) for p in paths])
        return config

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TrackerConfig:
        path = Path(path)
        return cls.from_dict(read_document(path), base_dir=str(path.parent))


def _path(value: object, base_dir: str | None) -> str:
    path = os.path.expanduser(str(value))
    if base_dir and not os.path.isabs(path):
        path = os.path.join(base_dir, path)
    return path


def _amounts(value: object, where: str, kind: type[int] | type[float]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping of resource class to amount")
    result: dict[str, Any] = {}
    for rc, amount in value.items():
        try:
            number = kind(amount)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}.{rc}: {amount!r} is not a number") from None
        if number < 0:
            raise ConfigError(f"{where}.{rc}: must not be negative")
        if kind is float and number == 0:
            raise ConfigError(f"{where}.{rc}: an allocation ratio must be above zero")
        result[str(rc)] = number
    return result


def _section(cls: type[_Section], value: object, where: str) -> _Section:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping")
    unknown = sorted(set(value) - {f.name for f in fields(cls)})
    if unknown:
        raise ConfigError(f"{where}: unknown keys: {', '.join(unknown)}")
    try:
        return cls(**value)
    except TypeError as e:
        raise ConfigError(f"{where}: {e}") from None


def _hex4(value: object, where: str) -> str | None:
    if value is None:
        return None
    text = str(value).lower()
    text = text[2:] if text.startswith("0x") else text
    if len(text) != 4 or any(c not in "0123456789abcdef" for c in text):
        raise ConfigError(f"{where}: {value!r} is not four hex digits")
    return text


def _pci_spec(item: object, index: int) -> PciDeviceSpec:
    where = f"pci_device_spec[{index}]"
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: expected a mapping")
    unknown = sorted(set(item) - {"vendor_id", "product_id", "address", "resource_class", "traits"})
    if unknown:
        raise ConfigError(f"{where}: unknown keys: {', '.join(unknown)}")
    if not any(item.get(k) for k in ("vendor_id", "product_id", "address")):
        raise ConfigError(f"{where}: name a vendor_id, product_id or address")
    rc = item.get("resource_class")
    if rc is not None:
        check_resource_class(rc, where)
    traits = tuple(check_trait(trait, where) for trait in item.get("traits") or ())
    return PciDeviceSpec(
        vendor_id=_hex4(item.get("vendor_id"), where + ".vendor_id"),
        product_id=_hex4(item.get("product_id"), where + ".product_id"),
        address=item.get("address"),
        resource_class=rc,
        traits=traits,
    )
