"""Parsing the tracker's configuration and provider config files (YAML and TOML)."""

from __future__ import annotations

import pytest

from berth.domain.capacity import Inventory
from berth.tracker.configuration.config import ConfigError, TrackerConfig, format_cpu_set, parse_cpu_set
from berth.tracker.configuration.provider_config import (
    ProviderConfigError,
    load_provider_config,
    load_provider_configs,
    parse_provider_config,
)
from berth.tracker.drivers.fake import FakeDriver

YAML = """
meta: {schema_version: "1.0"}
resource_classes:
  CUSTOM_LICENSE_SEAT: {units: seat, description: Seats of the database licence}
  CUSTOM_FPGA_SLOT: {units: slot, description: FPGA slots}
providers:
  - identification: {name: $COMPUTE_NODE}
    inventories:
      CUSTOM_LICENSE_SEAT: {total: 4, reserved: 1, max_unit: 2, allocation_ratio: 1.0}
    traits: [CUSTOM_PCI_DSS, HW_CPU_X86_AVX2]
  - identification: {name: $COMPUTE_NODE_SHELF}
    parent: $COMPUTE_NODE_NUMA1
    inventories:
      CUSTOM_FPGA_SLOT: 2
"""

TOML = """
[meta]
schema_version = "1.0"

[resource_classes.CUSTOM_LICENSE_SEAT]
units = "seat"
description = "Seats of the database licence"

[resource_classes.CUSTOM_FPGA_SLOT]
units = "slot"
description = "FPGA slots"

[[providers]]
identification = {name = "$COMPUTE_NODE"}
traits = ["CUSTOM_PCI_DSS", "HW_CPU_X86_AVX2"]
[providers.inventories.CUSTOM_LICENSE_SEAT]
total = 4
reserved = 1
max_unit = 2
allocation_ratio = 1.0

[[providers]]
identification = {name = "$COMPUTE_NODE_SHELF"}
parent = "$COMPUTE_NODE_NUMA1"
inventories = {CUSTOM_FPGA_SLOT = 2}
"""


def test_yaml_and_toml_say_the_same(tmp_path):
    (tmp_path / "a.yaml").write_text(YAML)
    (tmp_path / "a.toml").write_text(TOML)
    from_yaml = load_provider_config(tmp_path / "a.yaml")
    from_toml = load_provider_config(tmp_path / "a.toml")
    assert from_yaml.resource_classes == from_toml.resource_classes
    assert [(p.name, p.parent, p.inventories, p.traits) for p in from_yaml.providers] == [
        (p.name, p.parent, p.inventories, p.traits) for p in from_toml.providers
    ]
    seat = from_yaml.resource_classes["CUSTOM_LICENSE_SEAT"]
    assert (seat.units, seat.description) == ("seat", "Seats of the database licence")
    assert from_yaml.providers[0].inventories["CUSTOM_LICENSE_SEAT"] == Inventory(4, 1, 1, 2, 1, 1.0)
    assert from_yaml.providers[1].inventories["CUSTOM_FPGA_SLOT"].total == 2


def test_provider_config_applies_to_the_tree(tmp_path):
    (tmp_path / "a.yaml").write_text(YAML)
    config = TrackerConfig.from_dict({"provider_config": "a.yaml"}, base_dir=str(tmp_path))
    tree = FakeDriver().provider_tree("h1", config, config.provider_config)
    assert tree.root.inventories["CUSTOM_LICENSE_SEAT"].reserved == 1
    assert tree.root.traits == {"COMPUTE_NODE", "CUSTOM_PCI_DSS", "HW_CPU_X86_AVX2"}
    shelf = tree.get("h1_SHELF")
    assert (shelf.kind, shelf.parent) == ("custom", "h1_NUMA1")


def test_a_folder_of_provider_configs_is_merged_and_duplicates_refused(tmp_path):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "1.yaml").write_text(YAML)
    (tmp_path / "conf" / "2.toml").write_text("""
[resource_classes.CUSTOM_GPU_MEMORY]
units = "MiB"
[[providers]]
identification = {name = "$COMPUTE_NODE_NUMA0"}
traits = ["CUSTOM_NEAR_GPU"]
""")
    merged = load_provider_configs([tmp_path / "conf"])
    assert set(merged.resource_classes) == {"CUSTOM_LICENSE_SEAT", "CUSTOM_FPGA_SLOT", "CUSTOM_GPU_MEMORY"}
    assert len(merged.providers) == 3
    (tmp_path / "conf" / "3.yaml").write_text("providers: [{identification: {name: $COMPUTE_NODE}}]\n")
    with pytest.raises(ProviderConfigError, match="configured twice"):
        load_provider_configs([tmp_path / "conf"])


@pytest.mark.parametrize(
    "document, message",
    [
        (
            {"providers": [{"identification": {"name": "$COMPUTE_NODE"}, "inventories": {"CUSTOM_X": 1}}]},
            "not declared",
        ),
        ({"resource_classes": {"VCPU": {}}}, "only CUSTOM_"),
        ({"providers": [{"identification": {"name": "$COMPUTE_NODE"}, "traits": ["NOT_A_TRAIT"]}]}, "trait"),
        (
            {
                "providers": [
                    {"identification": {"name": "$COMPUTE_NODE"}, "inventories": {"FPGA": {"total": 2, "reserved": 3}}}
                ]
            },
            "reserved exceeds",
        ),
        (
            {
                "providers": [
                    {"identification": {"name": "$COMPUTE_NODE"}, "inventories": {"FPGA": {"total": 2, "max_unit": 3}}}
                ]
            },
            "max_unit",
        ),
        ({"providers": [{"identification": {"name": "$COMPUTE_NODE"}, "inventories": {"FPGA": {"used": 1}}}]}, "total"),
        ({"providers": [{"identification": {"uuid": "x"}}]}, "identification"),
        ({"providers": [{"identification": {"name": "$COMPUTE_NODE"}, "parent": "x"}]}, "no parent"),
        ({"providers": [{"identification": {"name": "a"}}, {"identification": {"name": "a"}}]}, "twice"),
        ({"meta": {"schema_version": "9.9"}}, "schema_version"),
        ({"whatever": 1}, "unknown keys"),
    ],
)
def test_invalid_provider_configs_are_refused(document, message):
    with pytest.raises(ProviderConfigError, match=message):
        parse_provider_config(document)


def test_provider_config_cannot_override_what_the_driver_reports_or_dangle(tmp_path):
    config = TrackerConfig()
    clash = parse_provider_config(
        {"providers": [{"identification": {"name": "$COMPUTE_NODE"}, "inventories": {"VCPU": 4}}]}
    )
    with pytest.raises(ProviderConfigError, match="already reports VCPU"):
        FakeDriver().provider_tree("h", config, clash)
    dangling = parse_provider_config({"providers": [{"identification": {"name": "x"}, "parent": "nowhere"}]})
    with pytest.raises(ProviderConfigError, match="unknown parent"):
        FakeDriver().provider_tree("h", config, dangling)
    reparent = parse_provider_config(
        {"providers": [{"identification": {"name": "$COMPUTE_NODE_NUMA0"}, "parent": "$COMPUTE_NODE_NUMA1"}]}
    )
    with pytest.raises(ProviderConfigError, match="reported by the driver"):
        FakeDriver().provider_tree("h", config, reparent)


def test_tracker_config_from_yaml_and_toml(tmp_path):
    (tmp_path / "agent.yaml").write_text("""
reserved: {VCPU: 1, MEMORY_MB: 2048, DISK_GB: 20}
allocation_ratios: {VCPU: 8}
cpu_dedicated_set: "4-7,^5"
instances_path: instances
pci_device_spec:
  - {vendor_id: "0x10DE", product_id: "1EB8", resource_class: CUSTOM_GPU_T4, traits: [CUSTOM_TENSOR]}
audit: {interval: 30, heal: true}
agent: {bind: "0.0.0.0:9000", token: secret}
""")
    (tmp_path / "agent.toml").write_text("""
cpu_dedicated_set = "4-7,^5"
instances_path = "instances"
[reserved]
VCPU = 1
MEMORY_MB = 2048
DISK_GB = 20
[allocation_ratios]
VCPU = 8
[[pci_device_spec]]
vendor_id = "0x10DE"
product_id = "1EB8"
resource_class = "CUSTOM_GPU_T4"
traits = ["CUSTOM_TENSOR"]
[audit]
interval = 30
heal = true
[agent]
bind = "0.0.0.0:9000"
token = "secret"
""")
    a = TrackerConfig.load(tmp_path / "agent.yaml")
    b = TrackerConfig.load(tmp_path / "agent.toml")
    assert a == b
    assert a.reserved == {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}
    assert a.allocation_ratios == {"VCPU": 8.0, "MEMORY_MB": 1.0, "DISK_GB": 1.0}
    assert a.cpu_dedicated_set == {4, 6, 7}
    assert a.instances_path == str(tmp_path / "instances")
    assert a.pci_device_spec[0].vendor_id == "10de" and a.pci_device_spec[0].product_id == "1eb8"
    assert a.audit.heal and a.audit.interval == 30 and a.agent.token == "secret"
    assert TrackerConfig().reserved == {"MEMORY_MB": 512}  # the defaults a host starts from


@pytest.mark.parametrize(
    "document, message",
    [
        ({"reserverd": {}}, "unknown configuration keys: reserverd"),
        ({"allocation_ratios": {"VCPU": 0}}, "above zero"),
        ({"reserved": {"VCPU": -1}}, "negative"),
        ({"cpu_dedicated_set": "0-3", "cpu_shared_set": "3-4"}, "overlap"),
        ({"cpu_shared_set": "4-2"}, "invalid CPU set"),
        ({"pci_device_spec": [{"resource_class": "CUSTOM_X"}]}, "name a vendor_id"),
        ({"pci_device_spec": [{"vendor_id": "xyz"}]}, "four hex digits"),
        ({"audit": {"intervall": 3}}, "unknown keys"),
    ],
)
def test_invalid_tracker_configs_are_refused(document, message):
    with pytest.raises(ConfigError, match=message):
        TrackerConfig.from_dict(document)


def test_cpu_sets_round_trip():
    assert parse_cpu_set("0-3,8,10-11,^2") == {0, 1, 3, 8, 10, 11}
    assert format_cpu_set({0, 1, 3, 8, 10, 11}) == "0-1,3,8,10-11"
    assert parse_cpu_set(None) is None
