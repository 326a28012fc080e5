"""AggregateInstanceExtraSpecsFilter: the flavor's ``aggregate_instance_extra_specs:<key>`` specs
against the metadata of the host's aggregates.

Every key must be in the metadata of one of the host's aggregates, and one of the values found
there must match the spec (``spec_match``: a plain value, or an operator such as ``>= 4`` or
``<or> a <or> b``). Aggregate metadata is configuration (``SelectionSettings.aggregate_metadata``):
Placement's aggregates have none.
"""

from __future__ import annotations

from berth.scheduler.filters.base import HostFilter
from berth.scheduler.filters.spec_match import matches
from berth.scheduler.hosts.host_state import HostState
from berth.scheduler.request.build_request import BuildRequest


class AggregateInstanceExtraSpecsFilter(HostFilter):
    name = "AggregateInstanceExtraSpecsFilter"

    def applies(self, request: BuildRequest) -> bool:
        return bool(request.spec.aggregate_extra_specs)

    def aggregates_read(self) -> frozenset[str]:
        return frozenset(self.settings.aggregate_metadata)

    def metadata_of(self, host: HostState) -> dict[str, set[str]]:
        """Each key of the host's aggregates' metadata, with every value it has among them."""
        found: dict[str, set[str]] = {}
        for aggregate in sorted(host.aggregates):
            for key, value in self.settings.aggregate_metadata.get(aggregate, {}).items():
                found.setdefault(key, set()).add(value)
        return found

    def refusal(self, host: HostState, request: BuildRequest) -> str | None:
        metadata = self.metadata_of(host)
        for key, wanted in sorted(request.spec.aggregate_extra_specs.items()):
            values = metadata.get(key)
            if not values:
                return f"no aggregate of the host has {key!r} in its metadata"
            if not any(matches(value, wanted) for value in values):
                return f"its aggregates' {key!r} ({', '.join(sorted(values))}) does not match {wanted!r}"
        return None
