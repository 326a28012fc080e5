"""POST /berth/pick: choose a host for a consumer among every tree that fits, and claim it at once.

Berth's own, outside the Placement API (docs/pick-and-claim.md). The body carries the query of
GET /allocation_candidates (read as at the highest microversion), how to weigh the trees, the
consumer, and optionally a server group, a lease and how many alternates to name; the store does the rest in one write
transaction (``berth.store.pick.transaction``), after weighing on the process's board of every tree
(``berth.store.pick.board.host_board``, ``berth.store.pick.board.on_board``) in a read, when the request is one the
board weighs. A body naming ``consumers`` instead is a gang, placed all (or at least ``min_count``)
or none in one write transaction (``berth.store.pick.gang.transaction``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, cast

from berth.api import microversion as mv
from berth.api.call import Call
from berth.api.candidates.candidate_query import parse_query
from berth.api.request import QueryArgs
from berth.api.responses import json_response
from berth.api.schemas.claims.pick import PICK_BODY
from berth.api.validation import normalize_uuid, validate
from berth.domain import error_codes
from berth.domain.candidate_query import CandidateQuery
from berth.domain.errors import BadRequest
from berth.domain.weighing import Multipliers, WeighPolicy, multipliers_for
from berth.store.pick.board.on_board import plan_on_board
from berth.store.pick.claim import BareClaimRefused
from berth.store.pick.gang.on_board import place_gang
from berth.store.pick.gang.transaction import GangPick, GangRequest, SpreadOverUuids, WithinUuids
from berth.store.pick.priorities import DEFAULT_PRIORITY, MAX_PRIORITY, MIN_PRIORITY
from berth.store.pick.quota_check import settings_for_pick
from berth.store.pick.request import Alternate, Preempted
from berth.store.pick.transaction import Consumer, Pick, PickRequest, pick_and_claim
from berth.store.server_groups.membership import GroupPolicy, ServerGroup
from berth.web.responses import Reply

# The keys only a gang's body has: a malformed one is refused with the gang's own code.
_GANG_KEYS = frozenset({"consumers", "min_count", "topology"})


def pick(call: Call) -> Reply:
    body = call.json_body()
    gang = isinstance(body, dict) and (bool(_GANG_KEYS & body.keys()) or "consumer" not in body)
    try:
        validate(body, PICK_BODY)
    except BadRequest as error:
        if gang:
            raise BadRequest(error.detail, code=error_codes.PICK_GANG_BAD_REQUEST) from None
        raise
    _check_priority(body)
    if gang:
        return _pick_gang(call, _gang_request(body))
    request = _pick_request(body)
    if request.moving == request.consumer.uuid:
        raise BadRequest(
            f"moving names the instance a move places again, not the pick's own consumer {request.moving}.",
            code=error_codes.PICK_BAD_REQUEST,
        )
    board = call.host_board
    if board.due() and not board.background:
        # Read before the write transaction, which on SQLite holds every writer back while it lasts.
        call.db.read(lambda conn: board.refresh(conn, call.provider_cache))
    cache = call.provider_cache
    plan = call.db.read(lambda conn: plan_on_board(conn, request, cache, board))

    def write(bare_first_claim: bool) -> Pick:
        return call.db.write(
            lambda conn: pick_and_claim(conn, request, cache, plan, last=True, bare_first_claim=bare_first_claim),
            settings=settings_for_pick(call.db.engine, request.consumer),
        )

    try:
        chosen = write(True)
    except BareClaimRefused:
        chosen = write(False)
    if plan is not None:
        plan.committed()
    return json_response(call, _answer(chosen, request.preempt))


def _pick_gang(call: Call, request: GangRequest) -> Reply:
    cache = call.provider_cache
    board = call.host_board
    if board.due() and not board.background:
        call.db.read(lambda conn: board.refresh(conn, cache))
    placed = place_gang(call.db, request, cache, board)
    return json_response(call, _gang_answer(placed, request))


def _pick_request(body: dict[str, Any]) -> PickRequest:
    """The request of a (schema-valid) body."""
    return PickRequest(
        query=_query(body),
        multipliers=_multipliers(body),
        consumer=_consumer(body["consumer"]),
        server_group=_server_group(body),
        lease_seconds=body.get("lease_seconds"),
        alternates=body.get("alternates", 0),
        priority=body.get("priority", DEFAULT_PRIORITY),
        preempt=body.get("preempt", False),
        avoid_trees=_avoid_trees(body),
        moving=_moving(body),
    )


def _avoid_trees(body: dict[str, Any]) -> frozenset[str]:
    return frozenset(normalize_uuid(uuid) for uuid in body.get("avoid_trees", ()))


def _check_priority(body: dict[str, Any]) -> None:
    priority = body.get("priority", DEFAULT_PRIORITY)
    if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise BadRequest(
            f"A pick's priority is from {MIN_PRIORITY} to {MAX_PRIORITY}, not {priority}.",
            code=error_codes.PICK_PRIORITY_OUT_OF_RANGE,
        )


def _gang_request(body: dict[str, Any]) -> GangRequest:
    """The gang request of a (schema-valid) body with ``consumers``; 400 for what the schema cannot
    tell."""
    consumers = tuple(_consumer(consumer) for consumer in body["consumers"])
    twice = sorted(uuid for uuid, count in Counter(c.uuid for c in consumers).items() if count > 1)
    if twice:
        raise _bad_gang(f"A gang names each consumer once, not {', '.join(twice)} twice or more.")
    min_count = body.get("min_count", len(consumers))
    if min_count > len(consumers):
        raise _bad_gang(f"min_count {min_count} is more than the gang's {len(consumers)} consumers.")
    if body.get("alternates", 0):
        raise _bad_gang("A gang names no alternates: each member is placed or not, in one write.")
    group = _server_group(body)
    topology = _topology(body.get("topology"))
    if body.get("preempt", False) and topology is not None:
        raise BadRequest(
            "A gang with a topology does not preempt: the trees made room on would have to lie in the "
            "aggregates the gang is placed in. Ask without the topology, or without preempt.",
            code=error_codes.PICK_GANG_PREEMPT_UNSUPPORTED,
        )
    if (
        isinstance(topology, SpreadOverUuids)
        and len(topology.aggregates) > 1
        and group is not None
        and group.policy == "affinity"
    ):
        raise BadRequest(
            f"Affinity server group {group.uuid} puts every member on one host: it cannot spread over "
            f"{len(topology.aggregates)} aggregates.",
            code=error_codes.PICK_GANG_TOPOLOGY_CONFLICT,
        )
    return GangRequest(
        query=_query(body),
        multipliers=_multipliers(body),
        consumers=consumers,
        min_count=min_count,
        topology=topology,
        server_group=group,
        lease_seconds=body.get("lease_seconds"),
        priority=body.get("priority", DEFAULT_PRIORITY),
        preempt=body.get("preempt", False),
        avoid_trees=_avoid_trees(body),
    )


def _bad_gang(detail: str) -> BadRequest:
    return BadRequest(detail, code=error_codes.PICK_GANG_BAD_REQUEST)


def _topology(topology: dict[str, Any] | None) -> WithinUuids | SpreadOverUuids | None:
    if topology is None:
        return None
    if "within" in topology:
        return WithinUuids(_aggregates(topology["within"]))
    return SpreadOverUuids(_aggregates(topology["spread_over"]), topology.get("max_skew", 1))


def _aggregates(uuids: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(normalize_uuid(uuid) for uuid in uuids))


def _query(body: dict[str, Any]) -> CandidateQuery:
    query: dict[str, str | list[str]] = body["query"]
    if "limit" in query:
        raise BadRequest(
            "The query of a pick takes no limit: every tree that fits is weighed.", code=error_codes.QUERY_BAD_VALUE
        )
    args = QueryArgs([(key, value) for key, values in query.items() for value in _as_list(values)])
    return parse_query(args, mv.MAX)


def _multipliers(body: dict[str, Any]) -> Multipliers:
    weighing = body.get("weigh", {})
    return multipliers_for(cast(WeighPolicy, weighing.get("policy", "spread")), weighing.get("multipliers"))


def _consumer(consumer: dict[str, Any]) -> Consumer:
    return Consumer(
        uuid=normalize_uuid(consumer["uuid"]),
        project_id=consumer["project_id"],
        user_id=consumer["user_id"],
        consumer_type=consumer["consumer_type"],
    )


def _server_group(body: dict[str, Any]) -> ServerGroup | None:
    group = body.get("server_group")
    if group is None:
        return None
    return ServerGroup(normalize_uuid(group["uuid"]), cast(GroupPolicy, group["policy"]), moving_member=_moving(body))


def _moving(body: dict[str, Any]) -> str | None:
    moving = body.get("moving")
    return normalize_uuid(moving) if moving is not None else None


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


def _answer(chosen: Pick, preempt: bool) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "allocation_request": _allocation_request(chosen.allocations, chosen.mappings),
        "root_provider_uuid": chosen.root_provider_uuid,
        "weight": chosen.weight,
        "trees_fitted": chosen.trees_fitted,
        "trees_weighed": chosen.trees_weighed,
        "alternates": [_alternate(alternate) for alternate in chosen.alternates],
    }
    if preempt:
        # Only for a pick that may preempt: empty when it found room without.
        answer["preempted"] = [_victim(victim) for victim in chosen.preempted]
    return answer


def _victim(victim: Preempted) -> dict[str, Any]:
    return {
        "consumer_uuid": victim.consumer_uuid,
        "priority": victim.priority,
        "root_provider_uuid": victim.root_provider_uuid,
    }


def _gang_answer(placed: GangPick, request: GangRequest) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "members": [
            {
                "consumer_uuid": member.consumer_uuid,
                "allocation_request": _allocation_request(member.allocations, member.mappings),
                "root_provider_uuid": member.root_provider_uuid,
                "weight": member.weight,
            }
            for member in placed.members
        ],
        "placed": len(placed.members),
        "asked": placed.asked,
        "trees_fitted": placed.trees_fitted,
        "trees_weighed": placed.trees_weighed,
    }
    if request.min_count < placed.asked:
        answer["not_placed"] = list(placed.not_placed)
    if request.preempt:
        # Only for a gang that may preempt: empty when the cloud took it as it stood.
        answer["preempted"] = [_victim(victim) for victim in placed.preempted]
    return answer


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
