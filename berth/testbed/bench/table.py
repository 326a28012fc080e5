"""The tables ``berth bench`` prints: one line per host count, then the worst candidate queries per
host count, then pick and claim beside the client-side loop (two lines per host count), then the
gangs (a line per host count, gang size and kind)."""

from __future__ import annotations

from typing import Any

from berth.testbed.bench.phases.worst_queries import WORST_VARIANTS
from berth.testbed.bench.rounds import percent
from berth.testbed.report import RULE, Column, Table

COLUMNS = [
    "hosts",
    "providers",
    "create/s",
    "basic ms",
    "traits ms",
    "granular_nested ms",
    "forbidden_agg_sharing ms",
    "unlimited ms",
    "claims/s",
    "conflicts",
    "errors",
    "violations",
    "memory MB",
    "cpu check ms",
    "steal %",
]
FOOTNOTE = (
    "latency columns: median/p95 in ms over sequential GET /allocation_candidates; "
    "memory MB: PSS of master + workers (their RSS summed); cpu check ms: a fixed piece "
    "of Python work before the server started / after the claims (higher: a slower "
    "machine); steal %: CPU time the host gave to other machines while the layout "
    "was built / during the claims"
)


def _ms(entry: dict[str, Any] | None) -> str:
    if not entry or entry.get("median_ms") is None:
        return "ERR"
    text = f"{entry['median_ms']:.1f}/{entry['p95_ms']:.1f}"
    if entry.get("errors"):
        text += f" ERR({entry['errors']})"
    return text


def _row(r: dict[str, Any]) -> list[str]:
    c = r["candidates"]
    mem = r.get("memory")
    return [
        str(r["hosts"]),
        str(r["build"]["providers"]),
        f"{r['build']['providers_per_second']:.1f}",
        _ms(c.get("basic")),
        _ms(c.get("traits")),
        _ms(c.get("granular_nested")),
        _ms(c.get("forbidden_agg_sharing")),
        _ms(c.get("unlimited")),
        f"{r['claims']['claims_per_second']:.1f}",
        str(r["claims"]["conflicts"]),
        str(r["claims"]["errors"]),
        str(r["verification"]["violations"]),
        f"{mem['pss_total_mb']:.0f} (RSS {mem['rss_total_mb']:.0f})" if mem else "-",
        "{before:.1f}/{after:.1f}".format(**r["cpu_check_ms"]),
        f"{percent(r['build'].get('steal_percent'))}/{percent(r['claims'].get('steal_percent'))}",
    ]


WORST_COLUMNS = ["hosts", *(f"{name} ms" for name in WORST_VARIANTS)]
WORST_FOOTNOTE = "worst candidate queries: median/p95 in ms, as above (docs/performance.md lists the queries)"

PLACING_COLUMNS = [
    "hosts",
    "placing",
    "placements/s",
    "p50/p99 ms",
    "conflicts",
    "over-commits",
    "anti-affinity placements/s",
    "anti-affinity violations",
    "weigh all ms",
]
PLACING_FOOTNOTE = (
    "placing: POST /berth/pick (pick) or GET /allocation_candidates then PUT /allocations, the next "
    "candidate on a 409 (client-side); pick+quota: the pick's servers again under a quota on their "
    "project too high to refuse; p50/p99: one placement, retries included; weigh all: one pick "
    "that every host fits, alone, median/p95"
)


def _worst_row(r: dict[str, Any]) -> list[str]:
    return [str(r["hosts"]), *(_ms(r["candidates"].get(name)) for name in WORST_VARIANTS)]


def _latency(figures: dict[str, Any]) -> str:
    if figures.get("p50_ms") is None:
        return "-"
    return f"{figures['p50_ms']:.1f}/{figures['p99_ms']:.1f}"


def _placing_row(hosts: int, name: str, figures: dict[str, Any]) -> list[str]:
    weighed = figures.get("weigh_all")
    return [
        str(hosts),
        name,
        f"{figures['placements_per_s']:.1f}",
        _latency(figures),
        str(figures["conflicts"]),
        str(figures["violations"]),
        f"{figures['anti_affinity']['placements_per_s']:.1f}",
        str(figures["anti_affinity_violations"]),
        _ms(weighed) if weighed else "-",
    ]


def _quota_row(hosts: int, figures: dict[str, Any]) -> list[str]:
    """The pick's servers under a quota that never refuses: no groups, no weigh-all of its own."""
    return [
        str(hosts),
        "pick+quota",
        f"{figures['placements_per_s']:.1f}",
        _latency(figures),
        str(figures["conflicts"]),
        str(figures["violations"]),
        "-",
        "-",
        "-",
    ]


def _placing_rows(r: dict[str, Any]) -> list[list[str]]:
    if "pick_and_claim" not in r:
        return []
    picked = r["pick_and_claim"]
    quota = [_quota_row(r["hosts"], picked["with_quota"])] if "with_quota" in picked else []
    return [
        _placing_row(r["hosts"], "pick", picked),
        *quota,
        _placing_row(r["hosts"], "client-side", r["client_side_claims"]),
    ]


GANG_COLUMNS = [
    "hosts",
    "gang",
    "kind",
    "gangs/s",
    "placements/s",
    "p50/p99 ms",
    "no room",
    "conflicts",
    "errors",
    "over-commits",
    "violations",
]
GANG_FOOTNOTE = (
    "gangs: POST /berth/pick with `consumers`, the pick phase's flavor; placements/s: members placed; "
    "p50/p99: one gang's request; violations: anti-affinity (a shared host), within (more than one rack) "
    "or spread_over (skew above max_skew), by gang"
)


def _gang_rows(r: dict[str, Any]) -> list[list[str]]:
    rows = []
    for size, kinds in r.get("gangs", {}).get("sizes", {}).items():
        for kind, figures in kinds.items():
            rows.append(
                [
                    str(r["hosts"]),
                    size,
                    kind,
                    f"{figures['gangs_per_s']:.1f}",
                    f"{figures['placements_per_s']:.1f}",
                    _latency(figures),
                    str(figures["no_valid_host"]),
                    str(figures["conflicts"]),
                    str(figures["errors"]),
                    str(figures["over_commits"]),
                    str(figures["rule_violations"]),
                ]
            )
    return rows


def format_table(results: list[dict[str, Any]]) -> str:
    table = Table([Column(title) for title in COLUMNS])
    worst = Table([Column(title) for title in WORST_COLUMNS])
    placing = Table([Column(title, align="<" if title == "placing" else ">") for title in PLACING_COLUMNS])
    gangs = Table([Column(title, align="<" if title == "kind" else ">") for title in GANG_COLUMNS])
    return "\n".join(
        [
            *table.render([RULE, *(_row(r) for r in results)]),
            FOOTNOTE,
            "",
            *worst.render([RULE, *(_worst_row(r) for r in results)]),
            WORST_FOOTNOTE,
            "",
            *placing.render([RULE, *(row for r in results for row in _placing_rows(r))]),
            PLACING_FOOTNOTE,
            "",
            *gangs.render([RULE, *(row for r in results for row in _gang_rows(r))]),
            GANG_FOOTNOTE,
        ]
    )
