"""Pick and claim: the body of POST /berth/pick (Berth's own, outside the Placement API)."""

from __future__ import annotations

from typing import Any, Final

from berth.api.schemas.common import NAME_PATTERN, UUID
from berth.api.validation import JsonSchema
from berth.domain.weighing import MULTIPLIER_NAMES, POLICY_MULTIPLIERS
from berth.store.leases.ledger import MAX_LEASE_SECONDS
from berth.store.pick.alternates import MAX_ALTERNATES
from berth.store.pick.avoided import MAX_AVOIDED
from berth.store.pick.gang.plan import MAX_GANG, MAX_TOPOLOGY_AGGREGATES
from berth.store.server_groups.membership import GROUP_POLICIES

_EXTERNAL_ID: Final[dict[str, Any]] = {"type": "string", "minLength": 1, "maxLength": 255}
_QUERY_VALUE: Final[dict[str, Any]] = {
    "oneOf": [
        {"type": "string"},
        {"type": "array", "minItems": 1, "items": {"type": "string"}},
    ]
}
_CONSUMER: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "uuid": UUID,
        "project_id": _EXTERNAL_ID,
        "user_id": _EXTERNAL_ID,
        "consumer_type": {"type": "string", "pattern": NAME_PATTERN, "minLength": 1, "maxLength": 255},
    },
    "required": ["uuid", "project_id", "user_id", "consumer_type"],
    "additionalProperties": False,
}
_AGGREGATES: Final[dict[str, Any]] = {
    "type": "array",
    "minItems": 1,
    "maxItems": MAX_TOPOLOGY_AGGREGATES,
    "items": UUID,
}
# Where a gang's members go (berth.store.pick.gang.plan): all under one aggregate of a set, or
# spread over a set's aggregates with counts at most ``max_skew`` apart.
_TOPOLOGY: Final[dict[str, Any]] = {
    "oneOf": [
        {
            "type": "object",
            "properties": {"within": _AGGREGATES},
            "required": ["within"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"spread_over": _AGGREGATES, "max_skew": {"type": "integer", "minimum": 0}},
            "required": ["spread_over"],
            "additionalProperties": False,
        },
    ]
}

PICK_BODY: Final[JsonSchema] = {
    "type": "object",
    "properties": {
        # The parameters of GET /allocation_candidates, as the query string would give them: a
        # parameter given several times (required, member_of, same_subtree) as a list.
        "query": {"type": "object", "minProperties": 1, "additionalProperties": _QUERY_VALUE},
        "weigh": {
            "type": "object",
            "properties": {
                "policy": {"enum": sorted(POLICY_MULTIPLIERS)},
                "multipliers": {
                    "type": "object",
                    "properties": {name: {"type": "number"} for name in MULTIPLIER_NAMES},
                    "additionalProperties": False,
                },
            },
            "additionalProperties": False,
        },
        # One consumer, or a gang of them asking the same (``consumers``, all placed or none).
        "consumer": _CONSUMER,
        "consumers": {"type": "array", "minItems": 1, "maxItems": MAX_GANG, "items": _CONSUMER},
        # The fewest members of a gang placed rather than none (all of them by default).
        "min_count": {"type": "integer", "minimum": 1, "maximum": MAX_GANG},
        "topology": _TOPOLOGY,
        "server_group": {
            "type": "object",
            "properties": {"uuid": UUID, "policy": {"enum": list(GROUP_POLICIES)}},
            "required": ["uuid", "policy"],
            "additionalProperties": False,
        },
        # Seconds from now until the claim is released unless confirmed (berth.store.leases.ledger).
        "lease_seconds": {"type": "number", "minimum": 0, "maximum": MAX_LEASE_SECONDS},
        # How many trees besides the one claimed to name, unclaimed (berth.store.pick.alternates).
        "alternates": {"type": "integer", "minimum": 0, "maximum": MAX_ALTERNATES},
        # Kept with the consumer (berth.store.pick.priorities); its range is checked by the handler,
        # with a code of its own.
        "priority": {"type": "integer"},
        # When nothing fits, remove consumers of lower priority to make room
        # (berth.store.pick.preemption).
        "preempt": {"type": "boolean"},
        # Trees (by a provider of each, usually the root) neither chosen nor made room on: hosts the
        # caller knows to be down, which the books cannot tell (berth.store.pick.avoided).
        "avoid_trees": {"type": "array", "items": UUID, "maxItems": MAX_AVOIDED},
        # The consumer a move places again (its instance; the pick's consumer is the move's own):
        # where it is now does not count against its server group, and its allocations, which the
        # claim takes over when the move lands, count as freed towards the quota.
        "moving": UUID,
    },
    "required": ["query"],
    "oneOf": [{"required": ["consumer"]}, {"required": ["consumers"]}],
    "dependencies": {"min_count": ["consumers"], "topology": ["consumers"], "moving": ["consumer"]},
    "additionalProperties": False,
}
