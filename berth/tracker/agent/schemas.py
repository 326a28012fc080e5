"""The request bodies of the agent's API as JSON schemas (Draft 4, as the service's and the
conductors'): a body that does not fit is refused, before the tracker is asked, with a 400
``claim.invalid_request`` naming the first problem by its path (``instance.flavor.vcpus: 'x' is not
of type 'integer'``).

The schemas say the kinds of the fields (a boolean is ``true`` or ``false``, never ``"false"``; a
number is not a string) and which fields a route knows; the host model still judges what the
values mean (a flavor's vCPUs at least one, its NUMA cells adding up) and answers with its own
reasons. ``null`` stands for a field left out where ``AgentClient`` sends it so (``heal``,
``older_than``, a rebuild's ``migration_uuid``). The fake driver's ``POST /faults`` and
``POST /faults/guests/{u}`` are checked by their own code (``berth.tracker.drivers.faults``).

jsonschema checks each body as it comes: a claim costs Placement calls and a synced write to the
claim store, against which the check's tens of microseconds do not count.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import jsonschema
from jsonschema.exceptions import best_match

from berth.clients.errors import InvalidRequest

JsonSchema = Mapping[str, Any]

TEXT: Final = {"type": "string", "minLength": 1, "maxLength": 255}
OPTIONAL_TEXT: Final = {"type": ["string", "null"], "minLength": 1, "maxLength": 255}
WHOLE: Final = {"type": "integer"}
COUNT: Final = {"type": "integer", "minimum": 0}
WHOLES: Final = {"type": ["array", "null"], "items": WHOLE}
TEXTS: Final = {"type": "array", "items": TEXT}
# An allocation set: provider uuid -> resource class -> amount.
ALLOCATIONS: Final = {
    "type": ["object", "null"],
    "additionalProperties": {"type": ["object", "null"], "additionalProperties": COUNT},
}


def _object(
    properties: Mapping[str, Any], required: tuple[str, ...] = (), *, closed: bool = True, nullable: bool = False
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": ["object", "null"] if nullable else "object", "properties": dict(properties)}
    if required:
        schema["required"] = list(required)
    if closed:
        schema["additionalProperties"] = False
    return schema


# The host model's documents (``berth.domain.host``), as their ``to_dict`` writes them. They are
# open to keys they do not name, as their ``from_dict`` reads them: a newer conductor may send more.
NUMA_REQUEST: Final = _object(
    {"cells": WHOLE, "cell_vcpus": WHOLES, "cell_memory_mb": WHOLES},
    closed=False,
    nullable=True,
)
PCI_REQUEST: Final = _object(
    {
        "count": WHOLE,
        "resource_class": OPTIONAL_TEXT,
        "vendor_id": OPTIONAL_TEXT,
        "product_id": OPTIONAL_TEXT,
        "traits": {"type": ["array", "null"], "items": TEXT},
        "numa_policy": TEXT,
    },
    closed=False,
)
FLAVOR: Final = _object(
    {
        "name": {"type": ["string", "null"], "maxLength": 255},
        "vcpus": WHOLE,
        "memory_mb": WHOLE,
        "disk_gb": WHOLE,
        "cpu_policy": TEXT,
        "numa": NUMA_REQUEST,
        "pci": {"type": ["array", "null"], "items": PCI_REQUEST},
        "resources": {"type": ["object", "null"], "additionalProperties": WHOLE},
    },
    ("vcpus", "memory_mb"),
    closed=False,
)
ANTI_AFFINITY: Final = _object(
    {"uuid": TEXT, "members": {"type": ["array", "null"], "items": TEXT}, "max_per_host": WHOLE},
    ("uuid",),
    closed=False,
    nullable=True,
)
INSTANCE: Final = _object(
    {
        "uuid": TEXT,
        "flavor": FLAVOR,
        "project_id": TEXT,
        "user_id": TEXT,
        "anti_affinity": ANTI_AFFINITY,
    },
    ("uuid", "flavor", "project_id", "user_id"),
    closed=False,
)
CELL_ASSIGNMENT: Final = _object(
    {"guest_cell": WHOLE, "host_cell": WHOLE, "vcpus": WHOLE, "memory_mb": WHOLE, "pinned_cpus": WHOLES},
    ("guest_cell", "host_cell", "vcpus", "memory_mb"),
    closed=False,
)
PCI_ASSIGNMENT: Final = _object(
    {"request": WHOLE, "provider_uuid": TEXT, "device": TEXT, "address": TEXT, "resource_class": TEXT},
    ("request", "provider_uuid", "device", "address", "resource_class"),
    closed=False,
)
SOURCE_CONTEXT: Final = _object(
    {
        "host": TEXT,
        "instance_uuid": TEXT,
        "migration_uuid": TEXT,
        "flavor": FLAVOR,
        "allocations": ALLOCATIONS,
        "shared_allocations": ALLOCATIONS,
        "numa": {"type": ["array", "null"], "items": CELL_ASSIGNMENT},
        "pci": {"type": ["array", "null"], "items": PCI_ASSIGNMENT},
        "project_id": TEXT,
        "user_id": TEXT,
    },
    ("host", "instance_uuid", "migration_uuid", "flavor", "allocations", "project_id", "user_id"),
    closed=False,
)

# The routes' bodies: each names every key its route reads, and no other.
PREEMPTED: Final = {"type": ["array", "null"], "items": TEXT}
# What the scheduler's claim wrote for the instance (tracker.instance_claim's ``held``).
HELD: Final = {"type": ["object", "null"], "additionalProperties": {"type": "object", "additionalProperties": COUNT}}
CLAIMS: Final[Mapping[str, JsonSchema]] = {
    "instance": _object({"instance": INSTANCE, "preempted": PREEMPTED, "held": HELD}),
    "unshelve": _object({"instance": INSTANCE, "preempted": PREEMPTED, "held": HELD}),
    "resize": _object({"instance": INSTANCE, "migration_uuid": TEXT, "source": SOURCE_CONTEXT, "flavor": FLAVOR}),
    "live_migration": _object({"instance": INSTANCE, "migration_uuid": TEXT, "source": SOURCE_CONTEXT}),
    "evacuate": _object({"instance": INSTANCE, "migration_uuid": TEXT, "source_host": TEXT}),
    "rebuild": _object({"instance": INSTANCE, "migration_uuid": OPTIONAL_TEXT, "source_host": OPTIONAL_TEXT}),
}
# The routes that read no body (``POST /migrations/{m}/{confirm,revert,drop}``, ``POST /instances/{u}/...``,
# ``POST /sync``): none, or an empty object; a key is a mistake, not something to ignore.
NO_BODY: Final = _object({})
# ``POST /migrations/{m}/source`` and ``.../cleanup_evacuated``.
MIGRATION_INSTANCE: Final = _object({"instance_uuid": TEXT})
# The oldest a soft-deleted instance may be kept, in seconds: never negative (a negative age would
# reclaim instances soft-deleted in the future, that is all of them).
RECLAIM: Final = _object({"older_than": {"type": ["number", "null"], "minimum": 0}})
AUDIT: Final = _object({"heal": {"type": ["boolean", "null"]}})
SPAWN_GUEST: Final = _object({"claim_id": TEXT})
MIGRATE_GUEST: Final = _object({"destination_host": OPTIONAL_TEXT, "claim_id": OPTIONAL_TEXT})

_validators: dict[int, jsonschema.Draft4Validator] = {}


def check(body: object, schema: JsonSchema) -> Any:
    """``body`` if it fits ``schema``; else ``InvalidRequest`` (400 ``claim.invalid_request``)
    naming where and how it does not."""
    validator = _validators.get(id(schema))
    if validator is None:
        validator = _validators[id(schema)] = jsonschema.Draft4Validator(schema)
    error = best_match(validator.iter_errors(body))
    if error is None:
        return body
    raise InvalidRequest(f"{_where(error.absolute_path)}: {error.message}")


def _where(path: Any) -> str:
    where = ""
    for part in path:
        where += f"[{part}]" if isinstance(part, int) else f".{part}" if where else str(part)
    return where or "the body"
