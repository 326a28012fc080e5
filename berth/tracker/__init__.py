"""The compute host's half of Berth: what one host has, the claims against it, and their audit.

    from berth.clients.placement import PlacementClient
    from berth.domain.host.request import Flavor, InstanceSpec
    from berth.tracker import ResourceTracker, TrackerConfig
    from berth.tracker.drivers.linux import LinuxDriver

    tracker = ResourceTracker("compute1", LinuxDriver("/var/lib/berth/instances"),
                              PlacementClient("http://127.0.0.1:8778"), TrackerConfig())
    tracker.start()                                   # report the host, recover, clean up
    with tracker.instance_claim(instance) as claim:   # fits, writes Placement, persists
        spawn(instance, claim.numa, claim.pci)

What a request is, the host's provider tree and the fitting of one on the other are the host
model's (``berth.domain.host``), which schedulers share, and so are the claims and their records
(``claims``, ``records``). The Placement client, the agent's client and the claim errors that cross
HTTP are the clients' (``berth.clients``). See docs/tracker.md.
"""

from berth.tracker.configuration.config import TrackerConfig
from berth.tracker.errors import TrackerError
from berth.tracker.moving.participant import MoveParticipant
from berth.tracker.tracker import ResourceTracker

__all__ = ["MoveParticipant", "ResourceTracker", "TrackerConfig", "TrackerError"]
