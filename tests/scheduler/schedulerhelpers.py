"""Flavors, images and settings the scheduler's tests build request specs from."""

from __future__ import annotations

from berth.scheduler.request.flavor import Flavor, Image, SchedulerConfig, parse_pci_aliases
from berth.scheduler.request.request_spec import RequestGroup, RequestSpec, build_request_spec

ZONE_AGGREGATE = "5f0c2a3e-8d7b-4c1a-9e6f-1b2c3d4e5f60"
OTHER_AGGREGATE = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"

ALIASES = parse_pci_aliases(
    [
        '{"name": "qat", "vendor_id": "8086", "product_id": "0443"}',
        '{"name": "nic", "resource_class": "CUSTOM_NIC_X710", "traits": "CUSTOM_FAST,hw_nic_sriov",'
        ' "numa_policy": "preferred", "device_type": "type-PF"}',
    ]
)
CONFIG = SchedulerConfig(pci_aliases=ALIASES, availability_zones={"az1": frozenset({ZONE_AGGREGATE})})


def flavor(extra_specs=None, *, vcpus=4, memory_mb=4096, root_gb=10, ephemeral_gb=0, swap_mb=0):
    return Flavor(
        "m1.test",
        vcpus,
        memory_mb,
        root_gb=root_gb,
        ephemeral_gb=ephemeral_gb,
        swap_mb=swap_mb,
        extra_specs=extra_specs or {},
    )


def spec(extra_specs=None, image_properties=None, *, flavor_=None, config=CONFIG, **kwargs) -> RequestSpec:
    assert flavor_ is None or extra_specs is None, "extra specs go into flavor_ when it is given"
    image = Image(image_properties) if image_properties is not None else None
    return build_request_spec(
        flavor_ or flavor(extra_specs), image, project_id="project", user_id="user", config=config, **kwargs
    )


def group(request_spec: RequestSpec, suffix: str = "") -> RequestGroup:
    return next(g for g in request_spec.groups if g.suffix == suffix)
