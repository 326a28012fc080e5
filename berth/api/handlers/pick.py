"""POST /berth/pick: choose a host for a consumer among every tree that fits, and claim it at once.

Berth's own, outside the Placement API (docs/pick-and-claim.md). The body carries the query of
GET /allocation_candidates (read as at the highest microversion), how to weigh the trees, the
consumer, and optionally a server group, a lease and how many alternates to name; the store does the rest in one write
transaction (``berth.store.pick.transaction``), after weighing on the process's board of every tree
(``berth.store.pick.host_board``, ``berth.store.pick.on_board``) in a read, when the request is one the
board weighs.
"""

from __future__ import annotations

from typing import Any, cast

from berth.api import microversion as mv
from berth.api.call import Call
from berth.api.candidate_query import parse_query
from berth.api.request import QueryArgs
from berth.api.responses import json_response
from berth.api.schemas.pick import PICK_BODY
from berth.api.validation import normalize_uuid
from berth.domain import error_codes
from berth.domain.errors import BadRequest
from berth.domain.weighing import WeighPolicy, multipliers_for
from berth.store.pick.on_board import plan_on_board
from berth.store.pick.request import Alternate
from berth.store.pick.transaction import Consumer, Pick, PickRequest, ServerGroup, pick_and_claim
from berth.store.server_groups.membership import GroupPolicy
from berth.web.responses import Reply


def pick(call: Call) -> Reply:
    request = _pick_request(call.json_body(PICK_BODY))
    board = call.host_board
    if board.due() and not board.background:
        # Read before the write transaction, which on SQLite holds every writer back while it lasts.
        call.db.read(lambda conn: board.refresh(conn, call.provider_cache))
    cache = call.provider_cache
    plan = call.db.read(lambda conn: plan_on_board(conn, request, cache, board))
    chosen = call.db.write(lambda conn: pick_and_claim(conn, request, cache, plan))
    return json_response(call, _answer(chosen))


def _pick_request(body: dict[str, Any]) -> PickRequest:
    """The request of a (schema-valid) body."""
    query: dict[str, str | list[str]] = body["query"]
    if "limit" in query:
        raise BadRequest(
            "The query of a pick takes no limit: every tree that fits is weighed.", code=error_codes.QUERY_BAD_VALUE
        )
    args = QueryArgs([(key, value) for key, values in query.items() for value in _as_list(values)])
    weighing = body.get("weigh", {})
    consumer = body["consumer"]
    group = body.get("server_group")
    return PickRequest(
        query=parse_query(args, mv.MAX),
        multipliers=multipliers_for(cast(WeighPolicy, weighing.get("policy", "spread")), weighing.get("multipliers")),
        consumer=Consumer(
            uuid=normalize_uuid(consumer["uuid"]),
            project_id=consumer["project_id"],
            user_id=consumer["user_id"],
            consumer_type=consumer["consumer_type"],
        ),
        server_group=(
            ServerGroup(normalize_uuid(group["uuid"]), cast(GroupPolicy, group["policy"]))
            if group is not None
            else None
        ),
        lease_seconds=body.get("lease_seconds"),
        alternates=body.get("alternates", 0),
    )


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


def _answer(chosen: Pick) -> dict[str, Any]:
    return {
        "allocation_request": _allocation_request(chosen.allocations, chosen.mappings),
        "root_provider_uuid": chosen.root_provider_uuid,
        "weight": chosen.weight,
        "trees_fitted": chosen.trees_fitted,
        "trees_weighed": chosen.trees_weighed,
        "alternates": [_alternate(alternate) for alternate in chosen.alternates],
    }


def _alternate(alternate: Alternate) -> dict[str, Any]:
    return {
        "root_provider_uuid": alternate.root_provider_uuid,
        "allocation_request": _allocation_request(alternate.allocations, alternate.mappings),
        "weight": alternate.weight,
    }


def _allocation_request(allocations: dict[str, dict[str, int]], mappings: dict[str, list[str]]) -> dict[str, Any]:
    """As GET /allocation_candidates writes an allocation request at the highest microversion."""
    return {
        "allocations": {uuid: {"resources": resources} for uuid, resources in allocations.items()},
        "mappings": mappings,
    }
