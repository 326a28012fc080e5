"""The scheduler's settings: PCI aliases as Nova's [pci] alias gives them, zones, the limit."""

from __future__ import annotations

import pytest

from berth.scheduler.errors import ConfigError
from berth.scheduler.request.flavor import PciAlias, SchedulerConfig, parse_pci_aliases


def test_an_alias_with_vendor_and_product_asks_for_the_class_the_agent_reports():
    alias = PciAlias.from_json('{"name": "qat", "vendor_id": "8086", "product_id": "0a4c", "device_type": "type-VF"}')
    assert alias.placement_resource_class == "CUSTOM_PCI_8086_0A4C"
    assert (alias.numa_policy, alias.device_type, alias.traits) == ("legacy", "type-VF", ())


def test_an_alias_class_and_traits_are_normalized():
    alias = PciAlias.from_json(
        '{"name": "gpu", "resource_class": "a100-gpu", "traits": "hw_gpu_cuda_compute_capability_v2_0, big"}'
    )
    assert alias.placement_resource_class == "CUSTOM_A100_GPU"
    assert alias.placement_traits == ("CUSTOM_BIG", "HW_GPU_CUDA_COMPUTE_CAPABILITY_V2_0")
    assert PciAlias("vf", resource_class="SRIOV_NET_VF").placement_resource_class == "SRIOV_NET_VF"


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ('{"name": "x"', "not JSON"),
        ('{"vendor_id": "8086", "product_id": "0443"}', "'name' is a required property"),
        ('{"name": "x", "vendor_id": "80861", "product_id": "0443"}', "does not match"),
        ('{"name": "x", "vendor_id": "8086"}', "needs a resource_class, or a vendor_id and a product_id"),
        ('{"name": "x", "resource_class": "X", "device_type": "type-VDPA"}', "is not one of"),
        ('{"name": "x", "resource_class": "X", "numa_policy": "socket"}', "'socket' is not supported"),
        ('{"name": "x", "resource_class": "X", "colour": "red"}', "Additional properties"),
    ],
)
def test_a_bad_alias_is_a_config_error(entry, problem):
    with pytest.raises(ConfigError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        parse_pci_aliases([entry])


def test_an_alias_names_one_device_spec():
    entry = '{"name": "qat", "vendor_id": "8086", "product_id": "0443"}'
    with pytest.raises(ConfigError, match="defined twice"):
        parse_pci_aliases([entry, entry])


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"availability_zones": {"az1": frozenset({"not-a-uuid"})}}, "zone 'az1'"),
        ({"availability_zones": {"az1": frozenset()}}, "zone 'az1'"),
        ({"max_placement_results": 0}, "max_placement_results"),
        ({"pci_aliases": {"a": PciAlias("b", resource_class="CUSTOM_X")}}, "filed under 'a'"),
    ],
)
def test_bad_settings(settings, problem):
    with pytest.raises(ConfigError, match=problem):
        SchedulerConfig(**settings)
