"""Traits an image asks for.

``trait:<NAME>=required`` properties join the unsuffixed request group (an image has no granular
groups and cannot forbid a trait). With ``image_metadata_prefilter`` set, the properties that name
the guest's hardware (``hw_architecture=x86_64``, ``hw_disk_bus=virtio`` ...) become traits the
compute node itself (the root provider) must have, as Nova's prefilter builds them: the property's
trait prefix, then its value upper-cased with ``-`` turned into ``_``.
"""

from __future__ import annotations

from typing import Final

from berth.scheduler.errors import SpecError
from berth.scheduler.request.flavor import Image
from berth.scheduler.request.groups import GroupDraft
from berth.scheduler.request.names import STANDARD_TRAITS, check_trait

TRAIT_PREFIX: Final = "trait:"
PREFILTER_TRAIT_PREFIXES: Final = {
    "hw_architecture": "HW_ARCH",
    "hw_cdrom_bus": "COMPUTE_STORAGE_BUS",
    "hw_disk_bus": "COMPUTE_STORAGE_BUS",
    "hw_emulation_architecture": "COMPUTE_ARCH",
    "hw_video_model": "COMPUTE_GRAPHICS_MODEL",
    "hw_vif_model": "COMPUTE_NET_VIF_MODEL",
    "hw_viommu_model": "COMPUTE_VIOMMU",
}


def add_image_traits(image: Image, unsuffixed: GroupDraft) -> None:
    for key, value in image.properties.items():
        if not key.startswith(TRAIT_PREFIX):
            continue
        if value != "required":
            raise SpecError(key, f"an image can only require a trait ('required'), not {value!r}")
        unsuffixed.add_trait(check_trait(key[len(TRAIT_PREFIX) :], key), "required", key)


def prefilter_traits(image: Image) -> frozenset[str]:
    """The root traits the image's hardware properties name."""
    traits = set()
    for key, prefix in PREFILTER_TRAIT_PREFIXES.items():
        value = image.properties.get(key)
        if value is None:
            continue
        trait = f"{prefix}_{value.replace('-', '_').upper()}"
        if trait not in STANDARD_TRAITS:
            raise SpecError(key, f"{value!r} names no standard trait ({trait} is unknown)")
        traits.add(trait)
    return frozenset(traits)
