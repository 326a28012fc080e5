"""The table ``berth bench`` prints: one line per host count."""

from __future__ import annotations

from typing import Any

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


def format_table(results: list[dict[str, Any]]) -> str:
    table = Table([Column(title) for title in COLUMNS])
    return "\n".join([*table.render([RULE, *(_row(r) for r in results)]), FOOTNOTE])
