"""``berth candidates``: GET /allocation_candidates, or with --explain why nothing fits."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click
from rich.console import RenderableType

from berth.cli.client.candidate_query import build_query
from berth.cli.client.connection import Api, placement_command
from berth.cli.client.output import emit, note, table


@click.command(
    "candidates",
    help="Ask where a request fits: GET /allocation_candidates with the API's query options. A granular "
    "group takes a suffix, as --resources1 VCPU:1 --required1 HW_CPU_X86_AVX2; --query adds a raw query string.",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
)
@click.option("--resources", multiple=True, metavar="RC:N[,RC:N]", help="the unsuffixed group's resources; repeatable")
@click.option("--required", multiple=True, metavar="TRAIT[,!TRAIT]", help="traits required or forbidden; repeatable")
@click.option("--member-of", multiple=True, metavar="[in:]AGG[,AGG]", help="aggregates; repeatable")
@click.option("--in-tree", default=None, metavar="UUID", help="only the tree holding this provider")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="at most this many candidates")
@click.option("--group-policy", type=click.Choice(("none", "isolate")), default=None, help="for granular groups")
@click.option("--query", "raw", multiple=True, metavar="'KEY=VALUE&...'", help="a raw query string, added as is")
@click.option("--explain", is_flag=True, help="count what each condition excludes instead: why nothing fits")
@placement_command
def candidates_command(api: Api, **options: Any) -> None:
    # The granular options (--resources1, ...) are not declared: Click leaves them in the context's args.
    extra = click.get_current_context().args
    plain: list[tuple[str, str]] = []
    for name in ("resources", "required", "member_of"):
        plain += [(name, value) for value in options[name]]
    for name in ("in_tree", "limit", "group_policy"):
        if options[name] is not None:
            plain.append((name, str(options[name])))
    query = build_query(plain, extra, options["raw"])
    if options["explain"]:
        body = api.get("/berth/allocation_candidates/explain?" + query)
        emit(api.output, body, lambda: _render_explain(body))
        return
    body = api.get("/allocation_candidates?" + query)
    emit(api.output, body, lambda: _render_candidates(api, body))


def _render_candidates(api: Api, body: dict[str, Any]) -> Iterable[RenderableType]:
    requests = body["allocation_requests"]
    if not requests:
        yield note("no allocation candidates: add --explain to see which condition excludes the providers")
        return
    names = {p["uuid"]: p["name"] for p in api.get("/resource_providers")["resource_providers"]}
    rows = []
    for number, request in enumerate(requests, start=1):
        for provider, entry in sorted(request["allocations"].items()):
            held = ", ".join(f"{rc}={amount}" for rc, amount in sorted(entry["resources"].items()))
            rows.append((number, names.get(provider, "?"), provider, held))
    yield table(f"{len(requests)} allocation candidates", ("#", "provider", "uuid", "resources"), rows)
    summary_rows = [
        (names.get(provider, "?"), rc, figures["used"], figures["capacity"])
        for provider, summary in sorted(body["provider_summaries"].items(), key=lambda item: names.get(item[0], ""))
        for rc, figures in sorted(summary["resources"].items())
    ]
    yield table("provider summaries", ("provider", "class", "used", "capacity"), summary_rows, numeric=2)


def _render_explain(report: dict[str, Any]) -> Iterable[RenderableType]:
    sections = [(f"group {group['suffix'] or '(unsuffixed)'}", group["conditions"]) for group in report["groups"]]
    if report["root"]:
        sections.append(("the tree's root", report["root"]))
    for title, conditions in sections:
        rows = [(c["kind"], c["condition"], c["excluded"], c["remaining"], c.get("alone", "?")) for c in conditions]
        yield table(title, ("kind", "condition", "excluded", "remaining", "alone"), rows, numeric=3)
    candidates = report.get("candidates")
    yield note(f"{report['providers']} providers in all; {candidates} candidates")
    if not candidates:
        for _, conditions in sections:
            cause = _cause(conditions)
            if cause:
                yield note(f"nothing fits: {cause}")
                return


def _cause(conditions: list[dict[str, Any]]) -> str | None:
    """What the step that leaves no provider says: that condition alone, or with those before it.

    The steps count one after another, so the step that empties the set is only the whole cause
    when no provider meets it even alone (``alone``, which a service before it was added leaves out:
    the step alone is named then, as it was).
    """
    left = None
    for condition in conditions:
        if condition["remaining"] == 0:
            alone = condition.get("alone", 0)
            if not alone or left is None:
                return f"no provider {condition['condition']}"
            return (
                f"of the {_providers(left)} the conditions above leave, none {condition['condition']} "
                f"({_providers(alone)} the conditions above exclude do)"
            )
        left = condition["remaining"]
    return None


def _providers(count: int) -> str:
    return f"{count} provider" + ("" if count == 1 else "s")
