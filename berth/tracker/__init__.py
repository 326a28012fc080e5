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

from berth.tracker.claim_requests import Flavor, InstanceSpec, NumaRequest, PciRequest
from berth.tracker.claims import Claim, NopClaim
from berth.tracker.config import TrackerConfig
from berth.tracker.errors import ClaimError, ClaimFailed, ClaimNotFound, InvalidRequest, TrackerError
from berth.tracker.participant import MoveParticipant
from berth.tracker.placement_client import PlacementClient
from berth.tracker.records import SourceContext
from berth.tracker.tracker import ResourceTracker

__all__ = [
    "Claim",
    "ClaimError",
    "ClaimFailed",
    "ClaimNotFound",
    "Flavor",
    "InstanceSpec",
    "InvalidRequest",
    "MoveParticipant",
    "NopClaim",
    "NumaRequest",
    "PciRequest",
    "PlacementClient",
    "ResourceTracker",
    "SourceContext",
    "TrackerConfig",
    "TrackerError",
]
