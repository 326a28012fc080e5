"""The URL map: every path, its methods, the microversion each appeared in and its policy rule."""

from __future__ import annotations

from functools import cache
from typing import Any

from berth.api import microversion as mv
from berth.api.call import Call
from berth.api.dashboard import dashboard_routes
from berth.api.handlers import health, metrics
from berth.api.handlers.claims import leases, pick, preemptions, quotas
from berth.api.handlers.placement import (
    aggregates,
    allocation_candidates,
    allocations,
    inventories,
    reshaper,
    resource_classes,
    root,
    traits,
    usages,
)
from berth.api.handlers.placement import (
    resource_providers as rps,
)
from berth.api.microversion import Version
from berth.api.responses import json_response
from berth.api.routing.openapi import build_document
from berth.api.routing.route import Handler, Route, RouteTable
from berth.web.responses import Reply

METRICS_PATH = "/metrics"
METRICS_RULE = "berth:metrics"
PROBE_PATHS = frozenset(["/healthz", "/readyz"])


def openapi_document(call: Call) -> Reply:
    return json_response(call, _document())


@cache
def _document() -> dict[str, Any]:
    return build_document(ROUTES)


def _r(
    handler: Handler,
    policy: str | None = None,
    since: Version = mv.BASE,
    too_old_status: int = 404,
    json_body_until: Version | None = None,
) -> Route:
    return Route(handler, since, policy, too_old_status, json_body_until)


def _build() -> RouteTable:
    P = "placement:"
    RP = "placement:resource_providers:"
    return {
        "/": {"GET": _r(root.versions)},
        "/resource_providers": {
            "GET": _r(rps.list_providers, RP + "list"),
            "POST": _r(rps.create_provider, RP + "create", json_body_until=mv.MAX),
        },
        "/resource_providers/<uuid>": {
            "GET": _r(rps.show_provider, RP + "show"),
            "PUT": _r(rps.update_provider, RP + "update", json_body_until=mv.MAX),
            "DELETE": _r(rps.delete_provider, RP + "delete"),
        },
        "/resource_providers/<uuid>/inventories": {
            "GET": _r(inventories.list_inventories, RP + "inventories:list"),
            "POST": _r(inventories.create_inventory, RP + "inventories:create", json_body_until=mv.MAX),
            "PUT": _r(inventories.replace_inventories, RP + "inventories:update", json_body_until=mv.MAX),
            "DELETE": _r(
                inventories.delete_inventories,
                RP + "inventories:delete",
                since=mv.DELETE_ALL_INVENTORIES,
                too_old_status=405,
            ),
        },
        "/resource_providers/<uuid>/inventories/<resource_class>": {
            "GET": _r(inventories.show_inventory, RP + "inventories:show"),
            "PUT": _r(inventories.update_inventory, RP + "inventories:update", json_body_until=mv.MAX),
            "DELETE": _r(inventories.delete_inventory, RP + "inventories:delete"),
        },
        "/resource_providers/<uuid>/usages": {
            "GET": _r(usages.provider_usages, RP + "usages"),
        },
        "/resource_providers/<uuid>/aggregates": {
            "GET": _r(aggregates.list_aggregates, RP + "aggregates:list", since=mv.PROVIDER_AGGREGATES),
            "PUT": _r(
                aggregates.update_aggregates,
                RP + "aggregates:update",
                since=mv.PROVIDER_AGGREGATES,
                json_body_until=mv.MAX,
            ),
        },
        "/resource_providers/<uuid>/allocations": {
            "GET": _r(allocations.list_provider_allocations, RP + "allocations:list"),
        },
        "/resource_providers/<uuid>/traits": {
            "GET": _r(traits.list_provider_traits, RP + "traits:list", since=mv.TRAITS),
            "PUT": _r(traits.update_provider_traits, RP + "traits:update", since=mv.TRAITS, json_body_until=mv.MAX),
            "DELETE": _r(traits.delete_provider_traits, RP + "traits:delete", since=mv.TRAITS),
        },
        "/resource_classes": {
            "GET": _r(resource_classes.list_resource_classes, P + "resource_classes:list", since=mv.RESOURCE_CLASSES),
            "POST": _r(
                resource_classes.create_resource_class,
                P + "resource_classes:create",
                since=mv.RESOURCE_CLASSES,
                json_body_until=mv.MAX,
            ),
        },
        "/resource_classes/<name>": {
            "GET": _r(resource_classes.show_resource_class, P + "resource_classes:show", since=mv.RESOURCE_CLASSES),
            "PUT": _r(
                resource_classes.update_resource_class,
                P + "resource_classes:update",
                since=mv.RESOURCE_CLASSES,
                # 1.7 took the body away (mv.PUT_RESOURCE_CLASS).
                json_body_until=Version(1, 6),
            ),
            "DELETE": _r(
                resource_classes.delete_resource_class, P + "resource_classes:delete", since=mv.RESOURCE_CLASSES
            ),
        },
        "/traits": {
            "GET": _r(traits.list_traits, P + "traits:list", since=mv.TRAITS),
        },
        "/traits/<name>": {
            "GET": _r(traits.show_trait, P + "traits:show", since=mv.TRAITS),
            "PUT": _r(traits.put_trait, P + "traits:update", since=mv.TRAITS),
            "DELETE": _r(traits.delete_trait, P + "traits:delete", since=mv.TRAITS),
        },
        "/allocations": {
            "POST": _r(
                allocations.post_allocations,
                P + "allocations:manage",
                since=mv.POST_ALLOCATIONS,
                json_body_until=mv.MAX,
            ),
        },
        "/allocations/<consumer_uuid>": {
            "GET": _r(allocations.show_consumer_allocations, P + "allocations:list"),
            "PUT": _r(allocations.put_consumer_allocations, P + "allocations:update", json_body_until=mv.MAX),
            "DELETE": _r(allocations.delete_consumer_allocations, P + "allocations:delete"),
        },
        "/allocation_candidates": {
            "GET": _r(
                allocation_candidates.list_allocation_candidates,
                P + "allocation_candidates:list",
                since=mv.ALLOCATION_CANDIDATES,
            ),
        },
        # Berth's own extensions, outside the Placement API.
        "/berth/openapi.json": {"GET": _r(openapi_document)},
        "/berth/allocation_candidates/explain": {
            "GET": _r(
                allocation_candidates.explain_allocation_candidates,
                P + "allocation_candidates:list",
                since=mv.ALLOCATION_CANDIDATES,
            ),
        },
        "/berth/leases": {
            "GET": _r(leases.list_leases, "berth:leases:list"),
        },
        "/berth/leases/<consumer_uuid>": {
            "GET": _r(leases.show_lease, "berth:leases:show"),
            "PUT": _r(leases.set_lease, "berth:leases:update", json_body_until=mv.MAX),
            "DELETE": _r(leases.release_lease, "berth:leases:delete"),
        },
        "/berth/leases/<consumer_uuid>/confirm": {
            "POST": _r(leases.confirm_lease, "berth:leases:confirm"),
        },
        "/berth/pick": {
            "POST": _r(pick.pick, "berth:pick", json_body_until=mv.MAX),
        },
        "/berth/preemptions": {
            "GET": _r(preemptions.list_preemptions, "berth:preemptions:list"),
        },
        "/berth/preemptions/<consumer_uuid>": {
            "GET": _r(preemptions.show_preemption, "berth:preemptions:show"),
        },
        "/berth/quotas": {
            "GET": _r(quotas.list_quotas, "berth:quotas:list"),
        },
        "/berth/quotas/<project_id>": {
            "GET": _r(quotas.show_project_quota, "berth:quotas:show"),
            "PUT": _r(quotas.set_project_quota, "berth:quotas:update", json_body_until=mv.MAX),
            "DELETE": _r(quotas.delete_project_quota, "berth:quotas:delete"),
        },
        "/berth/quotas/<project_id>/users/<user_id>": {
            "GET": _r(quotas.show_user_quota, "berth:quotas:show"),
            "PUT": _r(quotas.set_user_quota, "berth:quotas:update", json_body_until=mv.MAX),
            "DELETE": _r(quotas.delete_user_quota, "berth:quotas:delete"),
        },
        "/reshaper": {
            "POST": _r(reshaper.reshape, P + "reshaper:reshape", since=mv.RESHAPER, json_body_until=mv.MAX),
        },
        "/usages": {
            # Authorised in the handler: the rule's target is the project asked about.
            "GET": _r(usages.project_usages, since=mv.PROJECT_USAGES),
        },
        # For operators' tools: probes without a token, metrics as --metrics says (served_routes).
        "/healthz": {"GET": _r(health.healthz)},
        "/readyz": {"GET": _r(health.readyz)},
        METRICS_PATH: {"GET": _r(metrics.metrics, METRICS_RULE)},
        **dashboard_routes(),
    }


ROUTES = _build()


def served_routes(metrics_mode: str) -> RouteTable:
    """The routes as served with ``--metrics metrics_mode``: ``off`` serves no ``/metrics``, ``open``
    serves it without its rule (the application also asks no token for it)."""
    if metrics_mode == "guarded":
        return ROUTES
    served = {path: methods for path, methods in ROUTES.items() if path != METRICS_PATH}
    if metrics_mode == "open":
        served[METRICS_PATH] = {"GET": _r(metrics.metrics)}
    return served
