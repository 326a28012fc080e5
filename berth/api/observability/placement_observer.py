"""The Placement service's request observer: the request metrics and log line, and the allocation
conflicts of the writes that take allocations."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from prometheus_client.metrics import Counter

from berth.api.observability.metrics import ALLOCATION_CONFLICTS
from berth.web.observability.request_observer import RequestObserver

# Routes whose writes take allocations, with the rule that two writers cannot both have the last units.
ALLOCATION_WRITES: Final = frozenset(["/allocations", "/allocations/{consumer_uuid}", "/reshaper", "/berth/pick"])


class PlacementRequestObserver(RequestObserver):
    """Also counts each 409 of an allocation write by its error code and reason."""

    def __init__(self, rules: Iterable[str], *, metrics: bool):
        super().__init__(rules, metrics=metrics)
        self._conflicts: dict[tuple[str, str], Counter] = {}

    def _count(
        self, route: str, method: str, status: int, seconds: float, error_code: str | None, error_reason: str | None
    ) -> None:
        super()._count(route, method, status, seconds, error_code, error_reason)
        if status == 409 and route in ALLOCATION_WRITES and method != "GET":
            labels = (error_code or "none", error_reason or "")
            conflicts = self._conflicts.get(labels)
            if conflicts is None:
                conflicts = self._conflicts[labels] = ALLOCATION_CONFLICTS.labels(*labels)
            conflicts.inc()
