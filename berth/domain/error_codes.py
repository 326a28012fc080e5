"""The error codes of the API, each a named constant.

These are Placement's codes (``placement.*``): clients and their test suites match on them, so a code
is part of the contract. Never change one's value or reuse it for another meaning; add a new one.
Every raise site names the constant, never the string.
"""

from __future__ import annotations

from typing import Final

# Any error that has no more specific code.
UNDEFINED: Final = "placement.undefined_code"
# A provider's or a consumer's generation changed meanwhile: read again and retry.
CONCURRENT_UPDATE: Final = "placement.concurrent_update"
# An inventory that still has allocations against it cannot be removed.
INVENTORY_IN_USE: Final = "placement.inventory.inuse"
# A provider (or resource class, trait) of that name exists already.
DUPLICATE_NAME: Final = "placement.duplicate_name"
# A provider that still has allocations cannot be deleted.
PROVIDER_IN_USE: Final = "placement.resource_provider.inuse"
# A provider that still has children cannot be deleted.
PROVIDER_CANNOT_DELETE_PARENT: Final = "placement.resource_provider.cannot_delete_parent"
# A provider named in a request body does not exist.
PROVIDER_NOT_FOUND: Final = "placement.resource_provider.not_found"
# A query parameter that may appear once appeared more often.
QUERY_DUPLICATE_KEY: Final = "placement.query.duplicate_key"
# A query parameter's value is not allowed, alone or with the others.
QUERY_BAD_VALUE: Final = "placement.query.bad_value"
# A query lacks a parameter it needs.
QUERY_MISSING_VALUE: Final = "placement.query.missing_value"

# --- Reasons ------------------------------------------------------------------------------------
# Finer than a code where Placement answers with none (``placement.undefined_code``): never in an
# answer, which keeps Placement's code, but the label ``reason`` of the metric of allocation
# conflicts, so that a dashboard can tell a full host from a stale generation.

# The allocation would take an inventory beyond its capacity.
REASON_CAPACITY_EXCEEDED: Final = "capacity_exceeded"
# The provider has no inventory of a class the allocation names.
REASON_NO_INVENTORY: Final = "no_inventory"
# The amount breaks the inventory's min_unit, max_unit or step_size.
REASON_UNIT_CONSTRAINTS: Final = "unit_constraints"

# --- Berth's own codes --------------------------------------------------------------------------
# For what Berth offers beyond the Placement API (``/berth/...``). Never ``placement.*``: those are
# Placement's alone.

# Any error of Berth's own HTTP services (beside the Placement API, such as the conductors' API)
# and of the Placement service's own ``/berth/...`` paths that has no more specific code: their
# answers never carry ``placement.undefined_code``.
BERTH_UNDEFINED: Final = "berth.undefined_code"
# Pick-and-claim found no host that fits the request and its server group, or every one that did
# was taken by concurrent claims before this one could write.
PICK_NO_VALID_HOST: Final = "berth.pick.no_valid_host"
# A server group was named with another policy than the one it was created with.
SERVER_GROUP_POLICY_CONFLICT: Final = "berth.server_group.policy_conflict"
# A claim lease was confirmed or extended after it had expired: the service released the consumer's
# allocations (and dropped the lease) instead, in the same transaction.
LEASE_EXPIRED: Final = "berth.lease.expired"
# A gang pick (``consumers``) could not place the least number of members it asked for
# (``min_count``, all by default); nothing of it was written. The detail says how many could have
# been placed and what stopped the rest: room, the server group's policy or the topology.
PICK_GANG_NO_VALID_HOST: Final = "berth.pick.gang_no_valid_host"
# A gang pick's body is malformed in a way of its own: ``consumer`` and ``consumers`` both or
# neither, ``consumers`` empty, too many or naming a consumer twice, ``min_count`` out of range, a
# ``topology`` of an unknown shape, or ``alternates`` asked for.
PICK_GANG_BAD_REQUEST: Final = "berth.pick.gang_bad_request"
# A gang pick's topology names an aggregate no provider is in.
PICK_GANG_UNKNOWN_AGGREGATE: Final = "berth.pick.gang_unknown_aggregate"
# A gang pick's topology contradicts its server group's policy (affinity spread over more than one
# aggregate).
PICK_GANG_TOPOLOGY_CONFLICT: Final = "berth.pick.gang_topology_conflict"
# A single pick's body is malformed in a way its schema cannot tell: ``moving`` naming the pick's own
# consumer.
PICK_BAD_REQUEST: Final = "berth.pick.bad_request"
# A pick's priority is outside MIN_PRIORITY..MAX_PRIORITY (berth.store.pick.priorities).
PICK_PRIORITY_OUT_OF_RANGE: Final = "berth.pick.priority_out_of_range"
# A gang pick asked to preempt, which gangs do not do yet.
PICK_GANG_PREEMPT_UNSUPPORTED: Final = "berth.pick.gang_preempt_unsupported"
# A claim would take a project (or one of its users) beyond a quota limit: the detail names the
# resource, the limit, the usage and the amount asked (berth.store.quotas.enforcement).
QUOTA_EXCEEDED: Final = "berth.quota.exceeded"
# A quota limit named a resource that is neither a resource class nor ``consumers``.
QUOTA_UNKNOWN_RESOURCE: Final = "berth.quota.unknown_resource"
# A quota limit that is not a whole number of zero or more.
QUOTA_BAD_LIMIT: Final = "berth.quota.bad_limit"
