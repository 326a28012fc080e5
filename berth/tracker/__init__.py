"""The compute host's half of Berth: what one host has, the claims against it, and their audit.

    from berth.tracker import ResourceTracker, PlacementClient, TrackerConfig, InstanceSpec, Flavor
    from berth.tracker.drivers.linux import LinuxDriver

    tracker = ResourceTracker("compute1", LinuxDriver("/var/lib/berth/instances"),
                              PlacementClient("http://127.0.0.1:8778"), TrackerConfig())
    tracker.start()                                   # report the host, recover, clean up
    with tracker.instance_claim(instance) as claim:   # fits, writes Placement, persists
        spawn(instance, claim.numa, claim.pci)

See docs/tracker.md.
"""

from berth.tracker.claims import (  # noqa: F401
    Claim,
    ClaimError,
    ClaimFailed,
    ClaimNotFound,
    Flavor,
    InstanceSpec,
    InvalidRequest,
    NopClaim,
    NumaRequest,
    PciRequest,
    SourceContext,
)
from berth.tracker.config import TrackerConfig  # noqa: F401
from berth.tracker.placement_client import PlacementClient  # noqa: F401
from berth.tracker.tracker import ResourceTracker  # noqa: F401
