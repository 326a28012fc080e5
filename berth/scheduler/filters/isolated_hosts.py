"""IsolatedHostsFilter: some images run on some hosts only (``isolated_images`` on
``isolated_hosts``), as Nova's filter of that name decides.

With ``restrict_isolated_hosts_to_isolated_images`` (the default) an isolated host takes isolated
images only and every other host the other images only; without it, isolated images still go to
isolated hosts only, while isolated hosts take any image. With no isolated image configured,
isolated hosts take nothing when restricted and anything otherwise. A request without an image id
is a request for an image that is not isolated.
"""

from __future__ import annotations

from berth.scheduler.filters.base import HostFilter
from berth.scheduler.hosts.host_state import HostState
from berth.scheduler.request.build_request import BuildRequest


class IsolatedHostsFilter(HostFilter):
    name = "IsolatedHostsFilter"

    def applies(self, request: BuildRequest) -> bool:
        return bool(self.settings.isolated_hosts or self.settings.isolated_images)

    def refusal(self, host: HostState, request: BuildRequest) -> str | None:
        host_isolated = host.name in self.settings.isolated_hosts
        image_isolated = request.spec.image_id in self.settings.isolated_images
        if self.settings.restrict_isolated_hosts_to_isolated_images:
            passes = image_isolated == host_isolated
        else:
            passes = host_isolated or not image_isolated
        if passes:
            return None
        if host_isolated:
            return "an isolated host, and the image is not one of the isolated images"
        return "not an isolated host, and the image is one of the isolated images"
