"""The request bodies of the conductors' API as JSON schemas (Draft 4, as the service's), checked as
the service checks its own (``berth.web.json_schemas``): a body that does not fit is refused with the
first problem found, by its path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from berth.domain.errors import BadRequest
from berth.web.json_schemas import first_error

# A name's most characters (the columns' length).
NAME_LENGTH: Final = 255
NAME: Final = {"type": "string", "minLength": 1, "maxLength": NAME_LENGTH}
UUID: Final = {"type": "string", "format": "uuid"}
# A UUID as an agent writes it, lowercase with its hyphens, so that one id has one spelling.
AGENT_ID: Final = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
# The most a flavor's size may be (Nova's, its database's largest integer).
MAX_SIZE: Final = 2**31 - 1


def whole_number(minimum: int, maximum: int) -> dict[str, Any]:
    """An integer, or its digits as a string (``"2"``), as Nova's parameter types take a flavor's
    sizes and a group's ``max_server_per_host``. The bounds apply to integers only: a string is read
    as its number (``digits_read``) and checked again. No more digits than ``maximum`` has: a string of
    thousands is refused here rather than read."""
    return {
        "type": ["integer", "string"],
        "pattern": "^[0-9]+$",
        "maxLength": len(str(maximum)),
        "minimum": minimum,
        "maximum": maximum,
    }


SIZE: Final = whole_number(0, MAX_SIZE)
# How many servers one create makes (``min_count``, ``max_count``): integers or their digits, as
# Nova's ``positive_integer`` takes them.
COUNT: Final = whole_number(1, 1000)
COUNTS: Final = ("min_count", "max_count")
# Nova's ``name`` parameter type, of servers, flavors and server groups: no whitespace first or
# last (``$(?!\n)``: Python's ``$`` also matches before a last newline).
NOVA_NAME: Final = {**NAME, "pattern": "^(?!\\s)[\\s\\S]*\\S$(?!\\n)"}
STRINGS: Final = {"type": "object", "additionalProperties": {"type": "string", "maxLength": 255}}
NOTHING: Final = {"type": ["null", "object"], "additionalProperties": False}
# A flavor's id or name (or its URL), or its id as a number, as Nova's ``flavorRef`` is.
FLAVOR_REF: Final = {"type": ["string", "integer"], "minLength": 1, "maxLength": NAME_LENGTH}
# A flag as Nova's action bodies take it: a JSON boolean or one of the words for one.
# fmt: off
FLAG_WORDS: Final = (
    True, "True", "TRUE", "true", "1", "ON", "On", "on", "YES", "Yes", "yes",
    False, "False", "FALSE", "false", "0", "OFF", "Off", "off", "NO", "No", "no",
)
# fmt: on
BOOLEAN: Final = {"type": ["boolean", "string"], "enum": list(FLAG_WORDS)}
# Extra specs' values: strings, or numbers (kept as their text), as Nova takes them.
SPEC_VALUES: Final = {"type": "object", "additionalProperties": {"type": ["string", "number"], "maxLength": 255}}


def _object(properties: Mapping[str, Any], required: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(required),
        "additionalProperties": False,
        **extra,
    }


SERVER_CREATE: Final = _object(
    {
        "server": _object(
            {
                "name": NOVA_NAME,
                "flavorRef": FLAVOR_REF,
                "imageRef": {"type": "string", "maxLength": 255},
                "image_properties": STRINGS,
                "availability_zone": {"type": ["string", "null"], "minLength": 1, "maxLength": 255},
                "min_count": COUNT,
                "max_count": COUNT,
                # Nova's bounds: keys of 1 to 255 characters, 128 of them (its default quota).
                "metadata": {
                    "type": "object",
                    "patternProperties": {"^.{1,255}$": {"type": "string", "maxLength": 255}},
                    "additionalProperties": False,
                    "maxProperties": 128,
                },
            },
            ("name", "flavorRef"),
        ),
        "os:scheduler_hints": {"type": "object", "properties": {"group": UUID}},
    },
    ("server",),
)

# One key per action: its arguments' schema.
ACTION_ARGUMENTS: Final[Mapping[str, Mapping[str, Any]]] = {
    "resize": _object({"flavorRef": FLAVOR_REF}, ("flavorRef",)),
    # As the live migration's and the evacuation's: no host but the scheduler's choice.
    "migrate": {"type": ["null", "object"], "properties": {"host": {"type": "null"}}, "additionalProperties": False},
    "confirmResize": NOTHING,
    "revertResize": NOTHING,
    # The destination is the scheduler's choice: a host named here is refused, saying so
    # (``named_host``, before these schemas are checked).
    "os-migrateLive": {
        "type": ["null", "object"],
        "properties": {
            "host": {"type": "null"},
            "block_migration": {**BOOLEAN, "enum": [*FLAG_WORDS, "auto"]},
            "disk_over_commit": BOOLEAN,
        },
        "additionalProperties": False,
    },
    "evacuate": {
        "type": ["null", "object"],
        "properties": {"host": {"type": "null"}, "onSharedStorage": BOOLEAN},
        "additionalProperties": False,
    },
    "shelve": NOTHING,
    "shelveOffload": NOTHING,
    # An offloaded server unshelved into a zone, or into any (null), as Nova's microversions 2.77 and
    # 2.91 take it. Anything else asked of these would be ignored: refused, so that nobody takes it for done.
    "unshelve": {
        "type": ["null", "object"],
        "properties": {"availability_zone": {"type": ["string", "null"], "minLength": 1, "maxLength": 255}},
        "additionalProperties": False,
    },
    "rebuild": {
        "type": ["null", "object"],
        "properties": {"imageRef": {"type": "string"}},
        "additionalProperties": False,
    },
    "softDelete": NOTHING,
    "restore": NOTHING,
    "forceDelete": NOTHING,
}

SERVER_ACTION: Final = {
    "type": "object",
    "properties": dict(ACTION_ARGUMENTS),
    "additionalProperties": False,
    "minProperties": 1,
    "maxProperties": 1,
}
# The moves whose destination the scheduler chooses, where Nova's callers may name a host.
MOVES_TO_A_HOST: Final = ("migrate", "os-migrateLive", "evacuate")


def named_host(body: object) -> None:
    """BadRequest, saying what to do, when a move names its host: the schema's own words ("'h' is
    not of type 'null'") told the caller only what it may not send."""
    if not isinstance(body, dict) or len(body) != 1:
        return  # the schema says what is wrong with it
    [(action, arguments)] = body.items()
    if action in MOVES_TO_A_HOST and isinstance(arguments, dict) and arguments.get("host") is not None:
        raise BadRequest(
            f"Invalid input for field/attribute {action}/host. Value: {arguments['host']!r}. Berth's scheduler "
            f"chooses the host of every {action}: leave out 'host' or give null."
        )


# A flavor's sizes, which Nova takes as integers or their digits.
FLAVOR_SIZES: Final = ("vcpus", "ram", "disk", "OS-FLV-EXT-DATA:ephemeral", "ephemeral", "swap")
FLAVOR_CREATE: Final = _object(
    {
        "flavor": _object(
            {
                "name": NOVA_NAME,
                "id": {
                    "type": ["string", "number", "null"],
                    "minLength": 1,
                    "maxLength": 255,
                    "pattern": "^[\\w.\\- ]+$",
                },
                "vcpus": whole_number(1, MAX_SIZE),
                "ram": whole_number(1, MAX_SIZE),
                "disk": SIZE,
                "OS-FLV-EXT-DATA:ephemeral": SIZE,
                "ephemeral": SIZE,
                "swap": SIZE,
                "extra_specs": SPEC_VALUES,
                # What Nova's clients send with every flavor they create (novaclient and the openstack
                # command: 1.0 and true); taken at those values only (berth.conductor.api.handlers.flavors).
                "rxtx_factor": {"type": "number"},
                "os-flavor-access:is_public": {"type": "boolean"},
            },
            # Nova requires ``disk`` too (its clients always send it); here it is 0 when not given,
            # as Berth's callers have made flavors (docs/servers-api.md, "Where Berth differs").
            ("name", "vcpus", "ram"),
        )
    },
    ("flavor",),
)

# None at all is taken, as Nova takes it (the flavor's are as they were).
EXTRA_SPECS: Final = _object({"extra_specs": SPEC_VALUES}, ("extra_specs",))
# ``PUT /flavors/{id}/os-extra_specs/{key}``: the one extra spec, ``{"KEY": "VALUE"}``, as Nova's.
EXTRA_SPEC_UPDATE: Final = {**SPEC_VALUES, "minProperties": 1, "maxProperties": 1}

GROUP_POLICY: Final = {"enum": ["affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"]}
SERVER_GROUP_CREATE: Final = _object(
    {
        "server_group": _object(
            {
                "name": NOVA_NAME,
                "policy": GROUP_POLICY,
                # Nova's before its microversion 2.64, which Nova's clients still send by default
                # (``openstack server group create --policy P``): the one policy in a list.
                "policies": {"type": "array", "items": GROUP_POLICY, "minItems": 1, "maxItems": 1},
                "rules": _object({"max_server_per_host": whole_number(1, MAX_SIZE)}),
            },
            # One of ``policy`` and ``policies`` is required (the handler says so).
            ("name",),
        )
    },
    ("server_group",),
)

HOST_REGISTER: Final = _object(
    {
        "host": _object(
            {
                "url": {"type": "string", "pattern": "^https?://", "maxLength": 1024},
                "zone": {"type": ["string", "null"], "minLength": 1, "maxLength": 255},
                "agent_token": {"type": ["string", "null"], "maxLength": 255},
                # The agent's id, as it keeps it (a UUID's lowercase text): another agent is refused
                # the host's name while the host is up (berth.conductor.records.hosts).
                "agent_id": {"type": ["string", "null"], "pattern": AGENT_ID},
            },
            ("url",),
        )
    },
    ("host",),
)

# The most hosts one ``PUT /hosts`` registers.
HOSTS_AT_ONCE: Final = 5000
HOSTS_REGISTER: Final = _object(
    {
        "hosts": {
            "type": "array",
            "maxItems": HOSTS_AT_ONCE,
            "items": _object(
                {"name": NAME, **HOST_REGISTER["properties"]["host"]["properties"]},
                ("name", "url"),
            ),
        }
    },
    ("hosts",),
)

HOST_DISABLE: Final = {
    "type": ["null", "object"],
    "properties": {"reason": {"type": ["string", "null"], "maxLength": 255}},
    "additionalProperties": False,
}


def digits_read(values: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """``values`` with those of ``names`` that are digits (``whole_number``) read as their numbers."""
    return {key: int(value) if key in names and isinstance(value, str) else value for key, value in values.items()}


def check(body: object, schema: Mapping[str, Any]) -> Any:
    """``body`` if it fits ``schema``; else BadRequest naming where and how it does not."""
    error = first_error(body, schema)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "the body"
        raise BadRequest(f"Invalid input for field/attribute {where}. Value: {error.instance!r}. {error.message}")
    return body
