"""Resource class and trait names: which a request may ask for, and how a PCI alias's names are
normalized the way the compute side names its device providers.

A standard name is one os-resource-classes or os-traits knows; any other must be a custom one
(``CUSTOM_`` and upper-case letters, digits and underscores). Placement refuses an unknown name with
a 400, so a request spec refuses it first, naming the key that asked for it.
"""

from __future__ import annotations

import re
from typing import Final

import os_resource_classes
import os_traits

from berth.scheduler.errors import SpecError

CUSTOM_NAME: Final = re.compile(r"^CUSTOM_[A-Z0-9_]+$")
STANDARD_RESOURCE_CLASSES: Final = frozenset(os_resource_classes.STANDARDS)
STANDARD_TRAITS: Final = frozenset(os_traits.get_traits())


def is_resource_class(name: str) -> bool:
    return name in STANDARD_RESOURCE_CLASSES or CUSTOM_NAME.match(name) is not None


def is_trait(name: str) -> bool:
    return name in STANDARD_TRAITS or CUSTOM_NAME.match(name) is not None


def check_resource_class(name: str, key: str) -> str:
    if not is_resource_class(name):
        raise SpecError(key, f"{name!r} is neither a standard resource class nor a CUSTOM_ one")
    return name


def check_trait(name: str, key: str) -> str:
    if not is_trait(name):
        raise SpecError(key, f"{name!r} is neither a standard trait nor a CUSTOM_ one")
    return name


def normalize_resource_class(name: str) -> str:
    """Upper case; a name that is neither standard nor custom becomes ``CUSTOM_<NAME>``."""
    upper = name.strip().upper()
    if is_resource_class(upper):
        return upper
    return str(os_resource_classes.normalize_name(upper))


def normalize_trait(name: str) -> str:
    """Upper case; a name that is neither standard nor custom becomes ``CUSTOM_<NAME>``."""
    upper = name.strip().upper()
    if is_trait(upper):
        return upper
    return str(os_traits.normalize_name(upper))
