"""JSON schemas of request bodies and query strings, per microversion, one module per noun.

Each ``*_schema(version)`` function returns the schema in force at that microversion, built once
and then shared; the same schemas feed request validation and the published OpenAPI document.
"""

from __future__ import annotations

from collections.abc import Iterator

from berth.api import microversion
from berth.api.schemas.aggregates import aggregates_put_schema
from berth.api.schemas.allocation_candidates import allocation_candidates_query_schema
from berth.api.schemas.allocations import allocations_post_schema, allocations_put_schema
from berth.api.schemas.inventories import INVENTORIES_PUT, INVENTORY_POST, INVENTORY_PUT_ONE
from berth.api.schemas.leases import LEASE_PUT
from berth.api.schemas.pick import PICK_BODY
from berth.api.schemas.reshaper import reshaper_schema
from berth.api.schemas.resource_classes import RESOURCE_CLASS_BODY
from berth.api.schemas.resource_providers import provider_body_schema, provider_list_query_schema
from berth.api.schemas.traits import PROVIDER_TRAITS_PUT, TRAITS_LIST_QUERY
from berth.api.schemas.usages import usages_query_schema
from berth.api.validation import JsonSchema


def every_schema() -> Iterator[JsonSchema]:
    """Every schema a request can be checked against, at every microversion (built once each), so
    that the server can compile their validators before it forks its workers."""
    yield from (
        INVENTORIES_PUT,
        INVENTORY_POST,
        INVENTORY_PUT_ONE,
        RESOURCE_CLASS_BODY,
        PROVIDER_TRAITS_PUT,
        TRAITS_LIST_QUERY,
        PICK_BODY,
        LEASE_PUT,
    )
    for version in microversion.ALL:
        yield provider_body_schema(version, create=True)
        yield provider_body_schema(version, create=False)
        yield provider_list_query_schema(version)
        yield allocation_candidates_query_schema(version)
        yield aggregates_put_schema(version)
        yield allocations_put_schema(version)
        yield allocations_post_schema(version)
        yield usages_query_schema(version)
        yield reshaper_schema(version)
