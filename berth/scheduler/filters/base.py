"""What every filter is: a check of one host against one request, with the reason of a refusal.

A filter's ``refusal`` says why the host cannot take the request, or None when it can;
``host_passes`` is the yes or no. ``applies`` says whether the filter has anything to check for
this request at all (a filter that does not apply passes every host and is not run), and
``pick_covers`` whether the service's pick-and-claim checks the same thing itself;
``aggregates_read`` which aggregates' members the scheduler must read for it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from berth.scheduler.hosts.host_state import HostState
from berth.scheduler.request.build_request import BuildRequest
from berth.scheduler.request.flavor import SchedulerConfig
from berth.scheduler.settings import SelectionSettings


class HostFilter(ABC):
    name: ClassVar[str]
    # It reads the host's agent snapshot: the service's pick-and-claim cannot do its work.
    needs_agent: ClassVar[bool] = False

    def __init__(self, settings: SelectionSettings, config: SchedulerConfig):
        self.settings = settings
        self.config = config

    def applies(self, request: BuildRequest) -> bool:
        return True

    def pick_covers(self, request: BuildRequest) -> bool:
        return False

    def aggregates_read(self) -> frozenset[str]:
        """The aggregates whose members it needs to know (``HostState.aggregates``)."""
        return frozenset()

    @abstractmethod
    def refusal(self, host: HostState, request: BuildRequest) -> str | None:
        """Why ``host`` cannot take the request, or None when it can."""

    def host_passes(self, host: HostState, request: BuildRequest) -> bool:
        return self.refusal(host, request) is None
