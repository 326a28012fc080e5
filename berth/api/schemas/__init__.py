"""JSON schemas of request bodies and query strings, per microversion.

Each ``*_schema(version)`` function returns the schema in force at that microversion; the same
functions feed request validation and the published OpenAPI document.
"""

from __future__ import annotations

import copy
from functools import cache

from berth.api.microversion import MAX, MIN, Version
from berth.domain.capacity import MAX_INT

UUID_PATTERN = "^[0-9a-fA-F-]{36}$"
NAME_PATTERN = "^[A-Z0-9_]+$"
CUSTOM_NAME_PATTERN = "^CUSTOM_[A-Z0-9_]+$"
GROUP_SUFFIX_PATTERN = "[a-zA-Z0-9_-]{1,64}"
FLOAT_MAX = 3.40282e38

UUID = {"type": "string", "format": "uuid"}
GENERATION = {"type": "integer", "minimum": 0, "maximum": MAX_INT}


def _int(minimum):
    return {"type": "integer", "minimum": minimum, "maximum": MAX_INT}


# --- resource providers ----------------------------------------------------------------------


@cache
def provider_body_schema(version, *, create: bool):
    properties = {"name": {"type": "string", "maxLength": 200}}
    if create:
        properties["uuid"] = UUID
    if version.at_least(14):
        properties["parent_provider_uuid"] = {"anyOf": [UUID, {"type": "null"}]}
    return {"type": "object", "properties": properties, "required": ["name"], "additionalProperties": False}


@cache
def provider_list_query_schema(version):
    properties = {"name": {"type": "string"}, "uuid": UUID}
    if version.at_least(3):
        properties["member_of"] = {"type": "string"}
    if version.at_least(4):
        properties["resources"] = {"type": "string"}
    if version.at_least(14):
        properties["in_tree"] = UUID
    if version.at_least(18):
        properties["required"] = {"type": "string"}
    return {"type": "object", "properties": properties, "additionalProperties": False}


@cache
def allocation_candidates_query_schema(version):
    """GET /allocation_candidates: plain keys, and the request-group keys with their suffixes."""
    properties = {"resources": {"type": "string"}}
    if version.at_least(16):
        properties["limit"] = {"type": "string", "pattern": "^[1-9][0-9]*$"}
    if version.at_least(17):
        properties["required"] = {"type": "string"}
    if version.at_least(21):
        properties["member_of"] = {"type": "string"}
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if not version.at_least(25):
        schema["required"] = ["resources"]
        return schema
    properties["group_policy"] = {"type": "string", "enum": ["none", "isolate"]}
    if version.at_least(35):
        properties["root_required"] = {"type": "string"}
    if version.at_least(36):
        properties["same_subtree"] = {"type": "string"}
    suffix = GROUP_SUFFIX_PATTERN if version.at_least(33) else "[1-9][0-9]*"
    keys = ["resources", "required", "member_of"] + (["in_tree"] if version.at_least(31) else [])
    for key in keys:
        properties.pop(key, None)
    schema["patternProperties"] = {f"^{key}({suffix})?$": {"type": "string"} for key in keys}
    return schema


# --- inventories -----------------------------------------------------------------------------

INVENTORY_RECORD = {
    "type": "object",
    "properties": {
        "total": _int(1),
        "reserved": _int(0),
        "min_unit": _int(1),
        "max_unit": _int(1),
        "step_size": _int(1),
        "allocation_ratio": {"type": "number", "maximum": FLOAT_MAX},
    },
    "required": ["total"],
    "additionalProperties": False,
}

INVENTORY_PUT_ONE = copy.deepcopy(INVENTORY_RECORD)
INVENTORY_PUT_ONE["properties"]["resource_provider_generation"] = GENERATION
INVENTORY_PUT_ONE["required"] = ["total", "resource_provider_generation"]

INVENTORY_POST = copy.deepcopy(INVENTORY_RECORD)
INVENTORY_POST["properties"]["resource_provider_generation"] = GENERATION
INVENTORY_POST["properties"]["resource_class"] = {"type": "string", "pattern": NAME_PATTERN}
INVENTORY_POST["required"] = ["total", "resource_class"]

INVENTORIES_PUT = {
    "type": "object",
    "properties": {
        "resource_provider_generation": GENERATION,
        "inventories": {
            "type": "object",
            "patternProperties": {NAME_PATTERN: INVENTORY_RECORD},
            "additionalProperties": False,
        },
    },
    "required": ["resource_provider_generation", "inventories"],
    "additionalProperties": False,
}


# --- resource classes and traits -------------------------------------------------------------

RESOURCE_CLASS_BODY = {
    "type": "object",
    "properties": {"name": {"type": "string", "pattern": CUSTOM_NAME_PATTERN, "maxLength": 255}},
    "required": ["name"],
    "additionalProperties": False,
}

PROVIDER_TRAITS_PUT = {
    "type": "object",
    "properties": {
        "traits": {"type": "array", "items": {"type": "string", "pattern": NAME_PATTERN}, "uniqueItems": True},
        "resource_provider_generation": GENERATION,
    },
    "required": ["traits", "resource_provider_generation"],
    "additionalProperties": False,
}

TRAITS_LIST_QUERY = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "associated": {"type": "string"}},
    "additionalProperties": False,
}


# --- aggregates ------------------------------------------------------------------------------

AGGREGATE_LIST = {"type": "array", "items": UUID, "uniqueItems": True}


@cache
def aggregates_put_schema(version):
    if not version.at_least(19):
        return AGGREGATE_LIST
    return {
        "type": "object",
        "properties": {"aggregates": AGGREGATE_LIST, "resource_provider_generation": GENERATION},
        "required": ["aggregates", "resource_provider_generation"],
        "additionalProperties": False,
    }


# --- allocations -----------------------------------------------------------------------------

_AMOUNTS = {
    "type": "object",
    "minProperties": 1,
    "patternProperties": {NAME_PATTERN: {"type": "integer", "minimum": 1, "maximum": MAX_INT}},
    "additionalProperties": False,
}
_EXTERNAL_ID = {"type": "string", "minLength": 1, "maxLength": 255}
_MAPPINGS = {
    "type": "object",
    "minProperties": 1,
    "patternProperties": {
        f"^{GROUP_SUFFIX_PATTERN}$|^$": {"type": "array", "minItems": 1, "items": UUID},
    },
}


@cache
def allocations_put_schema(version):
    """PUT /allocations/{consumer_uuid}."""
    if not version.at_least(12):
        schema = {
            "type": "object",
            "properties": {
                "allocations": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "resource_provider": {
                                "type": "object",
                                "properties": {"uuid": UUID},
                                "required": ["uuid"],
                                "additionalProperties": False,
                            },
                            "resources": _AMOUNTS,
                        },
                        "required": ["resource_provider", "resources"],
                        "additionalProperties": False,
                    },
                },
            },
            "required": ["allocations"],
            "additionalProperties": False,
        }
        if version.at_least(8):
            schema["properties"]["project_id"] = _EXTERNAL_ID
            schema["properties"]["user_id"] = _EXTERNAL_ID
            schema["required"] += ["project_id", "user_id"]
        return schema
    return _consumer_allocations_schema(version, allow_empty=version.at_least(28))


def _consumer_allocations_schema(version, *, allow_empty):
    schema = {
        "type": "object",
        "properties": {
            "allocations": {
                "type": "object",
                "minProperties": 0 if allow_empty else 1,
                "patternProperties": {
                    UUID_PATTERN: {
                        "type": "object",
                        "properties": {"generation": GENERATION, "resources": _AMOUNTS},
                        "required": ["resources"],
                        "additionalProperties": False,
                    }
                },
                "additionalProperties": False,
            },
            "project_id": _EXTERNAL_ID,
            "user_id": _EXTERNAL_ID,
        },
        "required": ["allocations", "project_id", "user_id"],
        "additionalProperties": False,
    }
    if version.at_least(28):
        schema["properties"]["consumer_generation"] = {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_INT}
        schema["required"].append("consumer_generation")
    if version.at_least(34):
        schema["properties"]["mappings"] = _MAPPINGS
    if version.at_least(38):
        schema["properties"]["consumer_type"] = {
            "type": "string",
            "pattern": NAME_PATTERN,
            "minLength": 1,
            "maxLength": 255,
        }
        schema["required"].append("consumer_type")
    return schema


@cache
def allocations_post_schema(version):
    """POST /allocations: several consumers at once (1.13)."""
    return {
        "type": "object",
        "minProperties": 1,
        "patternProperties": {UUID_PATTERN: _consumer_allocations_schema(version, allow_empty=True)},
        "additionalProperties": False,
    }


# --- usages ----------------------------------------------------------------------------------


@cache
def usages_query_schema(version):
    properties = {
        "project_id": {"type": "string", "minLength": 1, "maxLength": 255},
        "user_id": {"type": "string", "minLength": 1, "maxLength": 255},
    }
    if version.at_least(38):
        properties["consumer_type"] = {
            "type": "string",
            "pattern": f"{NAME_PATTERN}|^all$|^unknown$",
            "minLength": 1,
            "maxLength": 255,
        }
    return {"type": "object", "properties": properties, "required": ["project_id"], "additionalProperties": False}


# --- reshaper --------------------------------------------------------------------------------


@cache
def reshaper_schema(version):
    """POST /reshaper (1.30): a tree's inventories and the allocations against them, together."""
    # A copy: allocations_post_schema's answer is cached and shared with POST /allocations.
    allocations = {**allocations_post_schema(version), "minProperties": 0}
    return {
        "type": "object",
        "properties": {
            "inventories": {
                "type": "object",
                "minProperties": 1,
                "patternProperties": {UUID_PATTERN: INVENTORIES_PUT},
                "additionalProperties": False,
            },
            "allocations": allocations,
        },
        "required": ["inventories", "allocations"],
        "additionalProperties": False,
    }


# --- all of them -------------------------------------------------------------------------------


def every_schema():
    """Every schema a request can be checked against, at every microversion (built once each)."""
    yield from (
        INVENTORIES_PUT,
        INVENTORY_POST,
        INVENTORY_PUT_ONE,
        RESOURCE_CLASS_BODY,
        PROVIDER_TRAITS_PUT,
        TRAITS_LIST_QUERY,
    )
    for minor in range(MIN.minor, MAX.minor + 1):
        version = Version(1, minor)
        yield provider_body_schema(version, create=True)
        yield provider_body_schema(version, create=False)
        yield provider_list_query_schema(version)
        yield allocation_candidates_query_schema(version)
        yield aggregates_put_schema(version)
        yield allocations_put_schema(version)
        yield allocations_post_schema(version)
        yield usages_query_schema(version)
        yield reshaper_schema(version)
