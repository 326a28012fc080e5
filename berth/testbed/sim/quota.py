"""The run's project under a VCPU limit (``--quota SHARE``): that share of the cloud's VCPU capacity,
set before the workload through ``PUT /berth/quotas/{project}``, and enforced by the service on
every allocation write (the picks, the Placement path's claims, the agents' move claims), so that
the builds and resizes past it are refused. The ``quota`` invariant checks, from the books alone,
that the VCPUs the instances hold at the end are within it."""

from __future__ import annotations

import math
from typing import Final

from berth.clients.placement import PlacementClient
from berth.domain.capacity import capacity

# The project of the run's servers: the admin token's, in the development mode of noauth2.
PROJECT: Final = "admin"
# How the service's refusal begins (docs/pick-and-claim.md, "Quotas").
QUOTA_EXCEEDED: Final = "Quota exceeded"


def set_quota(placement: PlacementClient, share: float) -> int:
    """The VCPU limit set on the run's project: ``share`` of every provider's VCPU capacity."""
    total = 0
    for provider in placement.get("/resource_providers?resources=VCPU:1")["resource_providers"]:
        inventory = placement.get(f"/resource_providers/{provider['uuid']}/inventories")["inventories"]["VCPU"]
        total += capacity(inventory["total"], inventory["reserved"], inventory["allocation_ratio"])
    limit = max(1, math.floor(total * share))
    placement.request("PUT", f"/berth/quotas/{PROJECT}", {"limits": {"VCPU": limit}})
    return limit
