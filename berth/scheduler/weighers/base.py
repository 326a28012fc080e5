"""What every weigher is: a raw value per host, and a multiplier.

The raw values are normalised over the hosts weighed together and multiplied
(``berth.domain.weighing``, Nova's arithmetic). The multiplier is the configured one (the weigh
policy's, with ``SelectionSettings.multipliers`` over it), unless the host's aggregates' metadata
names ``<option>_weight_multiplier``, Nova's option name: then the lowest such value among the
host's aggregates.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import ClassVar

from berth.domain.weighing import HostFacts, Multipliers
from berth.scheduler.hosts.host_state import HostState
from berth.scheduler.request.build_request import BuildRequest

LOG = logging.getLogger(__name__)


class HostWeigher(ABC):
    name: ClassVar[str]
    # The field of ``Multipliers`` that holds its multiplier.
    multiplier_field: ClassVar[str]
    # Nova's option of the multiplier, also the key of aggregate metadata that overrides it.
    option: ClassVar[str]

    @abstractmethod
    def raw(self, facts: HostFacts, request: BuildRequest) -> float:
        """The host's value before normalisation: higher is better for a positive multiplier."""

    def configured(self, multipliers: Multipliers) -> float:
        return float(getattr(multipliers, self.multiplier_field))

    def multiplier(self, host: HostState, multipliers: Multipliers, metadata: Mapping[str, Mapping[str, str]]) -> float:
        if not metadata:
            # No aggregate has metadata (the common cloud): asked for every host a weigher weighs.
            return self.configured(multipliers)
        values = []
        for aggregate in sorted(host.aggregates):
            text = metadata.get(aggregate, {}).get(self.option)
            if text is None:
                continue
            try:
                values.append(float(text))
            except ValueError:
                LOG.warning("aggregate %s: %s=%r is not a number; ignored", aggregate, self.option, text)
        return min(values) if values else self.configured(multipliers)
