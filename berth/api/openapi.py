"""The OpenAPI 3.1 document of the API at its highest microversion.

Built from the routing table and the very schemas that validate requests, so the document cannot
drift from what the service accepts.  Served at ``GET /berth/openapi.json``.
"""

from __future__ import annotations

import copy
import re
from functools import lru_cache

from berth.api import microversion, schemas
from berth.api.routes import ROUTES

MAX = microversion.MAX

ERROR_SCHEMA = {
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

_BODIES = {
    ("POST", "/resource_providers"): schemas.provider_body_schema(MAX, create=True),
    ("PUT", "/resource_providers/<uuid>"): schemas.provider_body_schema(MAX, create=False),
    ("PUT", "/resource_providers/<uuid>/inventories"): schemas.INVENTORIES_PUT,
    ("POST", "/resource_providers/<uuid>/inventories"): schemas.INVENTORY_POST,
    ("PUT", "/resource_providers/<uuid>/inventories/<resource_class>"): schemas.INVENTORY_PUT_ONE,
    ("PUT", "/resource_providers/<uuid>/aggregates"): schemas.aggregates_put_schema(MAX),
    ("PUT", "/resource_providers/<uuid>/traits"): schemas.PROVIDER_TRAITS_PUT,
    ("POST", "/resource_classes"): schemas.RESOURCE_CLASS_BODY,
    ("PUT", "/allocations/<consumer_uuid>"): schemas.allocations_put_schema(MAX),
    ("POST", "/allocations"): schemas.allocations_post_schema(MAX),
    ("POST", "/reshaper"): schemas.reshaper_schema(MAX),
}

_CANDIDATE_QUERY = {
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
_QUERIES = {
    ("GET", "/resource_providers"): schemas.provider_list_query_schema(MAX),
    ("GET", "/traits"): schemas.TRAITS_LIST_QUERY,
    ("GET", "/usages"): schemas.usages_query_schema(MAX),
    ("GET", "/allocation_candidates"): _CANDIDATE_QUERY,
    ("GET", "/berth/allocation_candidates/explain"): _CANDIDATE_QUERY,
}

_SUCCESS = {
    ("GET", "/traits/<name>"): [204],
    ("PUT", "/traits/<name>"): [201, 204],
    ("PUT", "/resource_classes/<name>"): [201, 204],
    ("POST", "/resource_classes"): [201],
    ("POST", "/resource_providers/<uuid>/inventories"): [201],
    ("PUT", "/allocations/<consumer_uuid>"): [204],
    ("POST", "/allocations"): [204],
    ("POST", "/reshaper"): [204],
}

_ERRORS = [400, 401, 403, 404, 405, 406, 409, 413, 415, 503]
_PARAM = re.compile(r"<([a-z_]+)>")


def _success_codes(method, path):
    if (method, path) in _SUCCESS:
        return _SUCCESS[(method, path)]
    return [204] if method == "DELETE" else [200]


def _query_parameters(schema):
    required = set(schema.get("required", []))
    return [
        {"name": name, "in": "query", "required": name in required, "schema": copy.deepcopy(prop)}
        for name, prop in schema.get("properties", {}).items()
    ]


@lru_cache(maxsize=1)
def build_document() -> dict:
    paths: dict = {}
    for path, methods in ROUTES.items():
        oa_path = _PARAM.sub(r"{\1}", path)
        path_params = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in _PARAM.findall(path)
        ]
        entry = paths.setdefault(oa_path, {})
        for method, route in methods.items():
            operation = {
                "operationId": f"{method.lower()}{oa_path.replace('/', '_').replace('{', '').replace('}', '')}",
                "summary": route.policy or "version discovery",
                "description": f"Available from microversion {route.min_version}.",
                "parameters": path_params + _query_parameters(_QUERIES.get((method, path), {})),
                "responses": {},
            }
            if route.policy:
                operation["security"] = [{"token": []}]
            for code in _success_codes(method, path):
                empty = code == 204 or (code == 201 and path != "/resource_providers/<uuid>/inventories")
                operation["responses"][str(code)] = (
                    {"description": "success"}
                    if empty
                    else {"description": "success", "content": {"application/json": {"schema": {"type": "object"}}}}
                )
            for code in _ERRORS:
                operation["responses"][str(code)] = {
                    "description": "error",
                    "content": {"application/json": {"schema": ERROR_SCHEMA}},
                }
            body = _BODIES.get((method, path))
            if body is not None:
                operation["requestBody"] = {
                    "required": True,
                    "content": {"application/json": {"schema": copy.deepcopy(body)}},
                }
            entry[method.lower()] = operation
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
