"""/berth/preemptions and /berth/preemptions/{consumer_uuid}: the consumers preempting picks removed
(berth.store.pick.preemption), for the conductor to end their servers and the agents to drop their
claims."""

from __future__ import annotations

import datetime
from typing import Any

from berth.api.call import Call
from berth.api.responses import json_response
from berth.api.validation import is_uuid, normalize_uuid
from berth.domain.errors import BadRequest, NotFound
from berth.store.pick import preemption
from berth.store.pick.preemption import Preemption
from berth.web.responses import Reply

# The most records one answer names.
MAX_LIMIT = 10_000
_FILTERS = frozenset({"preempted_by", "since", "limit"})


def _consumer(value: str, what: str = "consumer_uuid") -> str:
    if not is_uuid(value):
        raise BadRequest(f"Malformed {what}: {value}")
    return normalize_uuid(value)


def _timestamp(moment: datetime.datetime) -> str:
    return moment.isoformat(timespec="microseconds") + "Z"


def _view(record: Preemption) -> dict[str, Any]:
    return {
        "consumer_uuid": record.consumer_uuid,
        "project_id": record.project_id,
        "priority": record.priority,
        "root_provider_uuid": record.root_provider_uuid,
        "preempted_by": record.preempted_by,
        "preempted_at": _timestamp(record.preempted_at),
    }


def _since(value: str) -> datetime.datetime:
    try:
        moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00").replace(" ", "+"))
    except ValueError:
        raise BadRequest(f"Invalid since: {value!r} is not an ISO 8601 time.") from None
    if moment.tzinfo is not None:
        try:
            moment = moment.astimezone(datetime.UTC).replace(tzinfo=None)
        except OverflowError:
            # Within a day of year 1 or 9999, its offset takes it past what a time can be in UTC.
            raise BadRequest(f"Invalid since: {value!r} is out of range in UTC.") from None
    return moment


def _limit(value: str) -> int:
    # ASCII digits only: str.isdigit() is true of "²", which int() refuses.
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= MAX_LIMIT:
        raise BadRequest(f"Invalid limit: {value!r} is not a whole number from 1 to {MAX_LIMIT}.")
    return int(value)


def list_preemptions(call: Call) -> Reply:
    args = call.args
    unknown = sorted(set(args.keys()) - _FILTERS)
    if unknown:
        raise BadRequest(f"Invalid query string parameters: {', '.join(unknown)}.")
    preempted_by = _consumer(args["preempted_by"], "preempted_by") if "preempted_by" in args else None
    since = _since(args["since"]) if "since" in args else None
    limit = _limit(args["limit"]) if "limit" in args else None
    records = call.db.read(
        lambda conn: preemption.list_preemptions(conn, preempted_by=preempted_by, since=since, limit=limit)
    )
    return json_response(call, {"preemptions": [_view(record) for record in records]})


def show_preemption(call: Call, consumer_uuid: str) -> Reply:
    consumer_uuid = _consumer(consumer_uuid)
    record = call.db.read(lambda conn: preemption.preemption_of(conn, consumer_uuid))
    if record is None:
        raise NotFound(f"Consumer {consumer_uuid} was not preempted.")
    return json_response(call, _view(record))
