"""GET /allocation_candidates: where could this request go?

The query string becomes a ``CandidateQuery`` (``berth.api.candidates.candidate_query``), whose names the store
turns into ids (``berth.store.candidates.names.resolve``); the store's ``CandidateFinder`` loads trees
batch by batch (through the process's ``ProviderCache``) and has the domain search them; the answer
is rendered by ``berth.api.candidates.candidate_answer``, with the connection still at hand for the few names
not already kept with the providers' copies.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from berth.api.call import Call
from berth.api.candidates.candidate_answer import kept_shape, render
from berth.api.candidates.candidate_query import parse_query
from berth.api.responses import json_response
from berth.store.candidates.explain import Report, explain
from berth.store.candidates.finder import CandidateFinder
from berth.store.candidates.names import AnswerNames, resolve
from berth.web.responses import Reply


def list_allocation_candidates(call: Call) -> Reply:
    query = parse_query(call.args, call.version)
    settings = call.settings

    def work(conn: Connection) -> dict[str, Any]:
        resolved = resolve(conn, query)
        finder = CandidateFinder(
            conn,
            resolved.request,
            call.provider_cache,
            limit=query.limit,
            max_candidates=settings.max_candidates,
            randomize=settings.randomize_candidates,
            kept_shape=kept_shape(call.version),
        )
        candidates, providers = finder.find()
        requested_classes = set(resolved.class_ids.values())
        names = AnswerNames(conn, providers, requested_classes)
        return render(call.version, candidates, providers, requested_classes, names, call.provider_cache, finder.runs)

    return json_response(call, call.db.read(work))


def explain_allocation_candidates(call: Call) -> Reply:
    """Berth's extension: how many providers each condition of the request excluded."""
    query = parse_query(call.args, call.version)
    settings = call.settings

    def work(conn: Connection) -> Report:
        resolved = resolve(conn, query)
        report = explain(
            conn,
            resolved.request,
            class_names={rc: name for name, rc in resolved.class_ids.items()},
            trait_names={trait: name for name, trait in resolved.trait_ids.items()},
            aggregate_uuids={aggregate: uuid for uuid, aggregate in resolved.aggregate_ids.items()},
        )
        finder = CandidateFinder(
            conn, resolved.request, call.provider_cache, limit=query.limit, max_candidates=settings.max_candidates
        )
        candidates, _ = finder.find()
        report["candidates"] = len(candidates)
        report["candidates_capped_at"] = finder.want
        return report

    return json_response(call, call.db.read(work))
