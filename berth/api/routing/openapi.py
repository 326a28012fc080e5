"""The OpenAPI 3.1 document of the API at its highest microversion.

Built from the routing table and the very schemas that validate requests, so the document cannot
drift from what the service accepts.  Served at ``GET /berth/openapi.json``.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Final

from berth.api import microversion
from berth.api.routing.route import Route, RouteTable
from berth.api.schemas.claims.leases import LEASE_PUT
from berth.api.schemas.claims.pick import PICK_BODY
from berth.api.schemas.claims.quotas import QUOTA_PUT
from berth.api.schemas.placement.aggregates import aggregates_put_schema
from berth.api.schemas.placement.allocations import allocations_post_schema, allocations_put_schema
from berth.api.schemas.placement.inventories import INVENTORIES_PUT, INVENTORY_POST, INVENTORY_PUT_ONE
from berth.api.schemas.placement.reshaper import reshaper_schema
from berth.api.schemas.placement.resource_classes import RESOURCE_CLASS_BODY
from berth.api.schemas.placement.resource_providers import provider_body_schema, provider_list_query_schema
from berth.api.schemas.placement.traits import PROVIDER_TRAITS_PUT, TRAITS_LIST_QUERY
from berth.api.schemas.placement.usages import usages_query_schema
from berth.api.validation import JsonSchema

MAX: Final = microversion.MAX

ERROR_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["errors"],
    "properties": {
        "errors": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["status", "title", "detail", "request_id"],
                "properties": {
                    "status": {"type": "integer"},
                    "title": {"type": "string"},
                    "detail": {"type": "string"},
                    "request_id": {"type": "string"},
                    "code": {"type": "string"},
                    "max_version": {"type": "string"},
                    "min_version": {"type": "string"},
                },
            },
        }
    },
}

# The 401 of Placement's paths: WebOb's own error, as Placement's authentication middleware answers it.
WEBOB_ERROR_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["message", "code", "title"],
    "properties": {"message": {"type": "string"}, "code": {"type": "string"}, "title": {"type": "string"}},
}

_BODIES: Final[dict[tuple[str, str], JsonSchema]] = {
    ("POST", "/resource_providers"): provider_body_schema(MAX, create=True),
    ("PUT", "/resource_providers/<uuid>"): provider_body_schema(MAX, create=False),
    ("PUT", "/resource_providers/<uuid>/inventories"): INVENTORIES_PUT,
    ("POST", "/resource_providers/<uuid>/inventories"): INVENTORY_POST,
    ("PUT", "/resource_providers/<uuid>/inventories/<resource_class>"): INVENTORY_PUT_ONE,
    ("PUT", "/resource_providers/<uuid>/aggregates"): aggregates_put_schema(MAX),
    ("PUT", "/resource_providers/<uuid>/traits"): PROVIDER_TRAITS_PUT,
    ("POST", "/resource_classes"): RESOURCE_CLASS_BODY,
    ("PUT", "/allocations/<consumer_uuid>"): allocations_put_schema(MAX),
    ("POST", "/allocations"): allocations_post_schema(MAX),
    ("POST", "/reshaper"): reshaper_schema(MAX),
    ("PUT", "/berth/leases/<consumer_uuid>"): LEASE_PUT,
    ("POST", "/berth/pick"): PICK_BODY,
    ("PUT", "/berth/quotas/<project_id>"): QUOTA_PUT,
    ("PUT", "/berth/quotas/<project_id>/users/<user_id>"): QUOTA_PUT,
}

_CANDIDATE_QUERY: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        name: {"type": "string"}
        for name in (
            "resources",
            "required",
            "member_of",
            "in_tree",
            "limit",
            "group_policy",
            "root_required",
            "same_subtree",
        )
    },
}
_QUERIES: Final[dict[tuple[str, str], JsonSchema]] = {
    ("GET", "/resource_providers"): provider_list_query_schema(MAX),
    ("GET", "/traits"): TRAITS_LIST_QUERY,
    ("GET", "/usages"): usages_query_schema(MAX),
    ("GET", "/allocation_candidates"): _CANDIDATE_QUERY,
    ("GET", "/berth/allocation_candidates/explain"): _CANDIDATE_QUERY,
}

_SUCCESS: Final[dict[tuple[str, str], list[int]]] = {
    ("GET", "/traits/<name>"): [204],
    ("PUT", "/traits/<name>"): [201, 204],
    ("PUT", "/resource_classes/<name>"): [201, 204],
    ("POST", "/resource_classes"): [201],
    ("POST", "/resource_providers/<uuid>/inventories"): [201],
    ("PUT", "/allocations/<consumer_uuid>"): [204],
    ("POST", "/allocations"): [204],
    ("POST", "/reshaper"): [204],
    ("POST", "/berth/leases/<consumer_uuid>/confirm"): [204],
}

_ERRORS: Final = [400, 401, 403, 404, 405, 406, 409, 413, 415, 503]
_PARAM = re.compile(r"<([a-z_]+)>")


def _success_codes(method: str, path: str) -> list[int]:
    if (method, path) in _SUCCESS:
        return _SUCCESS[(method, path)]
    return [204] if method == "DELETE" else [200]


def _query_parameters(schema: JsonSchema) -> list[dict[str, Any]]:
    required = set(schema.get("required", []))
    return [
        {"name": name, "in": "query", "required": name in required, "schema": copy.deepcopy(prop)}
        for name, prop in schema.get("properties", {}).items()
    ]


def _operation(method: str, path: str, route: Route) -> dict[str, Any]:
    oa_path = _PARAM.sub(r"{\1}", path)
    path_params = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}} for name in _PARAM.findall(path)
    ]
    operation: dict[str, Any] = {
        "operationId": f"{method.lower()}{oa_path.replace('/', '_').replace('{', '').replace('}', '')}",
        "summary": route.policy or "version discovery",
        "description": f"Available from microversion {route.min_version}.",
        "parameters": path_params + _query_parameters(_QUERIES.get((method, path), {})),
        "responses": _responses(method, path),
    }
    if route.policy:
        operation["security"] = [{"token": []}]
    body = _BODIES.get((method, path))
    if body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": copy.deepcopy(body)}},
        }
    return operation


def _responses(method: str, path: str) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    for code in _success_codes(method, path):
        empty = code == 204 or (code == 201 and path != "/resource_providers/<uuid>/inventories")
        responses[str(code)] = (
            {"description": "success"}
            if empty
            else {"description": "success", "content": {"application/json": {"schema": {"type": "object"}}}}
        )
    for code in _ERRORS:
        schema = WEBOB_ERROR_SCHEMA if code == 401 and not path.startswith("/berth/") else ERROR_SCHEMA
        responses[str(code)] = {"description": "error", "content": {"application/json": {"schema": schema}}}
    return responses


def build_document(routes: RouteTable) -> dict[str, Any]:
    """The OpenAPI document of the paths and methods of ``routes``."""
    paths: dict[str, dict[str, Any]] = {}
    for path, methods in routes.items():
        entry = paths.setdefault(_PARAM.sub(r"{\1}", path), {})
        for method, route in methods.items():
            entry[method.lower()] = _operation(method, path, route)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Berth (OpenStack Placement API)",
            "version": str(MAX),
            "description": "Requests select a microversion with the header "
            "`OpenStack-API-Version: placement X.Y` (1.0 when absent); this document "
            f"describes {MAX}.",
        },
        "components": {"securitySchemes": {"token": {"type": "apiKey", "in": "header", "name": "X-Auth-Token"}}},
        "paths": paths,
    }
