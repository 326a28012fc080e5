"""The JSON the page polls: the cloud's totals, its rankings, and pages of provider trees.

The page asks for the totals first and the rankings after, as the rankings cost the most to read;
the summary is both in one answer, for API callers.
"""

from __future__ import annotations

from typing import Any

from berth.api.call import Call
from berth.api.dashboard.pages import PAGE_SIZE
from berth.api.responses import json_response
from berth.api.validation import query_schema_check
from berth.store.observability import dashboard_providers, dashboard_queries
from berth.store.observability.dashboard_providers import InventoryUse, ProviderNode
from berth.store.observability.dashboard_queries import ClassTotals, Ranked, Summary
from berth.web.responses import Reply

MAX_PAGE_SIZE = 100
PROVIDERS_QUERY = {
    "type": "object",
    "properties": {
        "page": {"type": "string", "pattern": "^[1-9][0-9]{0,8}$"},
        "page_size": {"type": "string", "pattern": "^[1-9][0-9]{0,2}$"},
        "q": {"type": "string", "maxLength": 255},
        "sort": {"type": "string", "enum": list(dashboard_providers.SORTS)},
        # Only the trees whose fullest inventory is above this percentage (100: over capacity).
        "above": {"type": "string", "pattern": "^(0|[1-9][0-9]{0,3})$"},
    },
    "additionalProperties": False,
}
_NO_CACHE = {"cache-control": "no-cache"}


def summary(call: Call) -> Reply:
    figures = call.db.read(dashboard_queries.summary)
    return json_response(call, {**_totals(figures), **_rankings(figures)}, headers=_NO_CACHE)


def totals(call: Call) -> Reply:
    return json_response(call, _totals(call.db.read(dashboard_queries.totals)), headers=_NO_CACHE)


def rankings(call: Call) -> Reply:
    return json_response(call, _rankings(call.db.read(dashboard_queries.rankings)), headers=_NO_CACHE)


def _totals(figures: Summary) -> dict[str, Any]:
    return {
        "providers": figures.providers,
        "roots": figures.roots,
        "consumers": figures.consumers,
        "over_capacity": figures.over_capacity,
        "resource_classes": [_class(t) for _, t in sorted(figures.classes.items())],
    }


def _rankings(figures: Summary) -> dict[str, Any]:
    return {
        "fullest_providers": [_host(r) for r in figures.fullest_providers],
        "biggest_consumers": [{**_ranked(r, "project_id"), "consumers": r.owners} for r in figures.biggest_consumers],
        "biggest_projects": [_ranked(r, None) for r in figures.biggest_projects],
    }


def providers(call: Call) -> Reply:
    query_schema_check(call.args, PROVIDERS_QUERY)
    page = int(call.args.get("page", "1"))
    page_size = min(int(call.args.get("page_size", str(PAGE_SIZE))), MAX_PAGE_SIZE)
    search = call.args.get("q", "").strip() or None
    sort = call.args.get("sort", "name")
    above = int(call.args["above"]) if "above" in call.args else None
    found = call.db.read(
        lambda conn: dashboard_providers.provider_page(conn, page, page_size, search, above=above, sort=sort)
    )
    return json_response(
        call,
        {
            "page": page,
            "page_size": page_size,
            "q": search,
            "sort": sort,
            "above": above,
            "matched": found.matched,
            "pages": max(1, -(-found.matched // page_size)),
            "trees": [_node(n) for n in found.trees],
        },
        headers=_NO_CACHE,
    )


def _class(totals: ClassTotals) -> dict[str, Any]:
    return {
        "resource_class": totals.resource_class,
        "capacity": totals.capacity,
        "used": totals.used,
        "free": totals.free,
        "inventories": totals.inventories,
    }


def _ranked(entry: Ranked, label_key: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": entry.ident,
        "resource_class": entry.resource_class,
        "used": entry.used,
        "capacity": entry.capacity,
        "share": round(entry.share, 6),
    }
    if label_key is not None:
        body[label_key] = entry.label
    return body


def _host(entry: Ranked) -> dict[str, Any]:
    """A tree of the fullest: its root, and the member whose inventory ranks it there."""
    return {
        **_ranked(entry, "name"),
        "provider": {"id": entry.member_ident, "name": entry.member_label},
        "mean_share": round(entry.mean_share, 6),
    }


def _inventory(inventory: InventoryUse) -> dict[str, Any]:
    room = inventory.capacity
    return {
        "resource_class": inventory.resource_class,
        "total": inventory.total,
        "reserved": inventory.reserved,
        "allocation_ratio": inventory.allocation_ratio,
        "capacity": room,
        "used": inventory.used,
        "free": max(room - inventory.used, 0),
    }


def _node(node: ProviderNode) -> dict[str, Any]:
    return {
        "uuid": node.uuid,
        "name": node.name,
        "parent_uuid": node.parent_uuid,
        "inventories": [_inventory(i) for i in node.inventories],
        "children": [_node(c) for c in node.children],
    }
