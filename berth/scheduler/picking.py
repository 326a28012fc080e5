"""The service's pick-and-claim (``POST /berth/pick``), when the scheduler may leave the choice to it.

The service weighs every tree that fits (not only the first ``limit``), claims the best in the same
transaction and keeps hard anti-affinity atomic across schedulers. It knows what Placement knows
and nothing of the agents or of the scheduler's configuration, so it is used only when every
filter that applies to the request is one it applies itself (the server group's), no weigher
multiplier comes from aggregate metadata. The service counts the members of a server group it
placed itself; the scheduler checks each pick against where all the members are (their
allocations), and takes the Placement path for the request when a pick breaks the group's policy.
Every pick carries the flavor's priority (``berth.scheduler.request.priority``); a pick above the
preemptible level asks to preempt, so that the service, when nothing fits, removes consumers of
lower priority from one tree and names them (``preempted``, ``victims_of``); a gang, for the whole gang
or not at all.
A pick also names alternates when asked (other trees that pass, each with an allocation request
that fits, unclaimed), from the weighing it did already: no candidates query is needed for them.
Several instances are one gang pick (``gang_body``): all of them, or at least ``min_count``, or
none, in one write; a gang names no alternates.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from berth.domain.weighing import Multipliers
from berth.scheduler.filters.base import HostFilter
from berth.scheduler.hosts.candidates import AllocationRequest
from berth.scheduler.request.build_request import BuildRequest
from berth.scheduler.request.priority import PREEMPTIBLE
from berth.scheduler.selection import Victim
from berth.scheduler.service import INSTANCE_CONSUMER_TYPE
from berth.scheduler.settings import SelectionSettings
from berth.scheduler.weighers.base import HostWeigher

# The most alternates the service names for one pick (its body's schema refuses more).
MOST_ALTERNATES = 10

_GROUP_CHECKS = {
    "affinity": "ServerGroupAffinityFilter",
    "anti-affinity": "ServerGroupAntiAffinityFilter",
    "soft-affinity": "ServerGroupSoftAffinityWeigher",
    "soft-anti-affinity": "ServerGroupSoftAntiAffinityWeigher",
}


def pick_suits(
    request: BuildRequest,
    filters: Sequence[HostFilter],
    settings: SelectionSettings,
) -> bool:
    """Whether the service's pick would choose as the scheduler's filters and weighers would."""
    if any(f.applies(request) and not f.pick_covers(request) for f in filters):
        return False
    return not any(
        key.endswith("_weight_multiplier") for metadata in settings.aggregate_metadata.values() for key in metadata
    )


def breaks_group(request: BuildRequest, members_on: Mapping[str, set[str]], root: str) -> bool:
    """Whether a pick on ``root`` breaks the hard policy of the request's group, as the members'
    allocations show it: the service counts only the members it placed itself."""
    group = request.group
    if group is None:
        return False
    if group.policy == "anti-affinity":
        return len(members_on.get(root, ())) >= group.max_server_per_host
    if group.policy == "affinity":
        return bool(members_on) and root not in members_on
    return False


def pick_body(
    request: BuildRequest,
    instance_uuid: str,
    filters: Sequence[HostFilter],
    weighers: Sequence[HostWeigher],
    settings: SelectionSettings,
    alternates: int = 0,
    lease_seconds: int | None = None,
    avoid: Sequence[str] = (),
) -> dict[str, Any]:
    """The body of ``POST /berth/pick`` for one instance, asking for up to ``alternates`` other
    trees besides the one claimed (at most ``MOST_ALTERNATES``: the service names no more), for a
    claim lease of ``lease_seconds`` when given, and avoiding the trees of the roots ``avoid``
    (hosts down)."""
    spec = request.spec
    query: dict[str, list[str]] = {}
    for key, value in spec.candidates_query():
        if key != "limit":  # the pick weighs every tree that fits
            query.setdefault(key, []).append(value)
    body: dict[str, Any] = {
        "query": query,
        "weigh": {"policy": settings.weigh_policy, "multipliers": _multipliers(weighers, settings)},
        "consumer": {
            "uuid": instance_uuid,
            "project_id": spec.project_id,
            "user_id": spec.user_id,
            "consumer_type": INSTANCE_CONSUMER_TYPE,
        },
    }
    group = request.group
    enabled = {f.name for f in filters} | {w.name for w in weighers}
    if group is not None and _GROUP_CHECKS[group.policy] in enabled:
        body["server_group"] = {"uuid": group.uuid, "policy": group.policy}
    if request.moving_instance is not None:
        body["moving"] = request.moving_instance
    if alternates > 0:
        body["alternates"] = min(alternates, MOST_ALTERNATES)
    if spec.priority != PREEMPTIBLE:
        body["priority"] = spec.priority
    if spec.priority > PREEMPTIBLE:
        body["preempt"] = True
    if lease_seconds is not None:
        body["lease_seconds"] = lease_seconds
    if avoid:
        body["avoid_trees"] = list(avoid)
    return body


def gang_body(
    request: BuildRequest,
    instance_uuids: Sequence[str],
    filters: Sequence[HostFilter],
    weighers: Sequence[HostWeigher],
    settings: SelectionSettings,
    *,
    min_count: int | None = None,
    lease_seconds: int | None = None,
    avoid: Sequence[str] = (),
) -> dict[str, Any]:
    """The body of one ``POST /berth/pick`` placing every instance of ``instance_uuids`` (a gang),
    at least ``min_count`` of them (all when None), each with a lease when ``lease_seconds`` is given."""
    body = pick_body(request, instance_uuids[0], filters, weighers, settings, lease_seconds=lease_seconds, avoid=avoid)
    one = body.pop("consumer")
    body["consumers"] = [{**one, "uuid": instance} for instance in instance_uuids]
    if min_count is not None and min_count < len(instance_uuids):
        body["min_count"] = min_count
    return body


def alternates_of(answer: Mapping[str, Any]) -> list[tuple[str, AllocationRequest]]:
    """The alternates a pick's answer names, best first: each tree's root provider uuid and the
    allocation request that fits it (none when the service was not asked, or is older)."""
    return [
        (str(alternate["root_provider_uuid"]), AllocationRequest.from_dict(alternate["allocation_request"]))
        for alternate in answer.get("alternates") or ()
    ]


def victims_of(answer: Mapping[str, Any]) -> tuple[Victim, ...]:
    """The consumers a pick removed to make room (none when it did not preempt)."""
    return tuple(
        Victim(str(v["consumer_uuid"]), int(v.get("priority", 0)), str(v.get("root_provider_uuid") or ""))
        for v in answer.get("preempted") or ()
    )


def _multipliers(weighers: Sequence[HostWeigher], settings: SelectionSettings) -> dict[str, float]:
    """Every multiplier the scheduler would use; a weigher it does not run weighs nothing."""
    base = settings.base_multipliers
    enabled = {w.multiplier_field for w in weighers}
    return {
        field.name: float(getattr(base, field.name)) if field.name in enabled else 0.0
        for field in dataclasses.fields(Multipliers)
    }
