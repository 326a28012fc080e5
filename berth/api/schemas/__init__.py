"""JSON schemas of request bodies and query strings, per microversion, one module per noun:
``placement/`` for the Placement API's, ``claims/`` for Berth's own under ``/berth``, ``common``
for what they share.

Each ``*_schema(version)`` function returns the schema in force at that microversion, built once
and then shared; the same schemas feed request validation and the published OpenAPI document.
"""

from __future__ import annotations

from collections.abc import Iterator

from berth.api import microversion
from berth.api.schemas.claims.leases import LEASE_PUT
from berth.api.schemas.claims.pick import PICK_BODY
from berth.api.schemas.placement.aggregates import aggregates_put_schema
from berth.api.schemas.placement.allocation_candidates import allocation_candidates_query_schema
from berth.api.schemas.placement.allocations import allocations_post_schema, allocations_put_schema
from berth.api.schemas.placement.inventories import INVENTORIES_PUT, INVENTORY_POST, INVENTORY_PUT_ONE
from berth.api.schemas.placement.reshaper import reshaper_schema
from berth.api.schemas.placement.resource_classes import RESOURCE_CLASS_BODY
from berth.api.schemas.placement.resource_providers import provider_body_schema, provider_list_query_schema
from berth.api.schemas.placement.traits import PROVIDER_TRAITS_PUT, TRAITS_LIST_QUERY
from berth.api.schemas.placement.usages import usages_query_schema
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
