"""What a stress run found: counts by operation and outcome, faults, violations; as a table and JSON."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from berth.testbed.report import RULE, Column, Table
from berth.testbed.stress.config import KINDS, OUTCOME_COLUMNS, READS

ALL = "all requests"


@dataclass
class StressResult:
    backend: str
    workers: int | None
    concurrency: int
    fault: str
    seconds_planned: float | None
    elapsed: float = 0.0
    stats: Counter[tuple[str, str]] = field(default_factory=Counter)
    faults: list[dict[str, Any]] = field(default_factory=list)
    # Per fault: the longest time without an acknowledged write around it (runner.outages).
    outages: list[float | None] = field(default_factory=list)
    violations: list[dict[str, Any]] = field(default_factory=list)
    providers: int = 0
    consumers_seen: int = 0
    consumers_present: int = 0
    notes: Counter[str] = field(default_factory=Counter)
    server_tracebacks: int = 0
    server_exceptions: dict[str, int] = field(default_factory=dict)
    server_log_excerpt: str = ""
    # The picks with a lease (stress/leasing.py): leasing.summarise of every claimer's records, and
    # "released twice": re-claims of a released consumer that a second release took away.
    leases: dict[str, Any] = field(default_factory=dict)

    def count(self, column: str, rows: Iterable[str] | None = None) -> int:
        chosen = None if rows is None else set(rows)
        return sum(n for (row, col), n in self.stats.items() if col == column and (chosen is None or row in chosen))

    @property
    def http_500s(self) -> int:
        return sum(1 for v in self.violations if v["what"] == "HTTP 500")

    @property
    def lost_writes(self) -> int:
        """Read-backs or final states the log does not allow: an acknowledged write lost, or a refused
        one that landed."""
        return sum(1 for v in self.violations if v["what"].endswith("contradicts the log"))

    @property
    def duplicates(self) -> int:
        """Consumer generation conflicts on consumers only this claimer writes: a write applied twice,
        or one reported failed that landed."""
        return self.stats.get(("generation-conflicts", "409"), 0)

    @property
    def over_commits(self) -> int:
        return sum(1 for v in self.violations if v["what"] == "over capacity")

    @property
    def leases_released_early(self) -> int:
        return int(self.leases.get("released early", 0))

    @property
    def leases_released_late(self) -> int:
        return int(self.leases.get("released late", 0))

    @property
    def leases_released_twice(self) -> int:
        return int(self.leases.get("released twice", 0))

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def requests(self) -> int:
        return sum(n for (row, _), n in self.stats.items() if row in KINDS or row in READS)

    @property
    def writes(self) -> int:
        return sum(n for (row, _), n in self.stats.items() if row in KINDS)

    def _counts_table(self) -> list[str]:
        rows = [*KINDS, *READS]
        width = max(len(k) for k in (*rows, ALL)) + 2
        table = Table(
            [Column("operation", width, "<"), Column("total", 8), *(Column(c, 14) for c in OUTCOME_COLUMNS)],
            separator="",
        )
        lines: list[list[str] | None] = []
        for row in [*rows, ALL]:
            counts = [self.count(c, rows if row == ALL else (row,)) for c in OUTCOME_COLUMNS]
            if row == ALL:
                lines.append(RULE)
            lines.append([row, str(sum(counts)), *(str(n) for n in counts)])
        return table.render(lines)

    def _summary(self) -> list[str]:
        lines = [
            f"rounds without any candidate: {self.stats.get(('no-candidates', '2xx'), 0)}; unexpected consumer "
            f"generation conflicts: {self.stats.get(('generation-conflicts', '409'), 0)}"
        ]
        if self.faults:
            lines += [f"fault injected: {f['kind']} at {f['at']:.1f}s ({f['detail']})" for f in self.faults]
            if self.outages:
                shown = ", ".join("never" if s is None else f"{s:.1f}s" for s in self.outages)
                lines.append(f"seconds without an acknowledged write around each fault: {shown}")
        else:
            lines.append("faults injected: 0")
        lines.append(
            f"consumers audited: {self.consumers_seen} ({self.consumers_present} holding allocations "
            f"at the end); uncertain writes: {self.notes.get('uncertain writes', 0)}"
        )
        lines += self._lease_lines()
        if self.server_tracebacks:
            lines.append(f"server log: {self.server_tracebacks} traceback(s)")
            lines += [f"  {n} x {line[:160]}" for line, n in list(self.server_exceptions.items())[:5]]
        lines.append(
            f"acknowledged writes: {self.count('2xx', KINDS)}; lost or contradicting the log: {self.lost_writes}; "
            f"duplicates: {self.duplicates}; over-commits: {self.over_commits}"
        )
        kinds = Counter(v["what"] for v in self.violations)
        lines.append(
            f"violations: {len(self.violations)}"
            + (" (" + ", ".join(f"{k}: {n}" for k, n in kinds.most_common()) + ")" if kinds else "")
        )
        rate = self.requests / self.elapsed if self.elapsed else 0.0
        wrate = self.writes / self.elapsed if self.elapsed else 0.0
        lines.append(f"elapsed: {self.elapsed:.1f}s   requests/s: {rate:.1f}   writes/s: {wrate:.1f}")
        return lines

    def _lease_lines(self) -> list[str]:
        n = self.leases
        if not n.get("taken"):
            return []
        delay = n.get("max release delay")
        return [
            f"leases taken by picks: {n['taken']} ({n['to confirm']} to confirm, {n['to expire']} left to expire, "
            f"{n['to release']} released by the client); confirmed: {n['confirmed']} "
            f"(allocations gone after: {n['confirmed but released']}); confirmation refused as expired: "
            f"{n['confirm refused as expired']}; expired and released: {n['expired']}"
            + (f" (at most {delay:.1f}s after the expiry)" if delay is not None else "")
            + f"; released by the client: {n['released by the client']}; unsettled: {n['unsettled']}",
            f"leases released early: {n['released early']} ({n['checked before expiry']} read back before their "
            f"expiry); late: {n['released late']}; twice: {n['released twice']} (of {n['re-claimed']} "
            "consumers claimed again after their release)",
        ]

    def table(self) -> str:
        head = (
            f"berth stress: {self.backend}, {self.workers or '?'} workers, {self.concurrency} claimers, "
            f"fault {self.fault}, {self.providers} providers"
        )
        return "\n".join([head, "", *self._counts_table(), "", *self._summary()])

    def violation_report(self, limit: int = 20) -> str:
        lines = [f"{len(self.violations)} violation(s):"]
        for v in self.violations[:limit]:
            lines.append(
                f"- {v['what']}: "
                + ", ".join(
                    f"{k}={v[k]}"
                    for k in ("detail", "request", "status", "request_id", "body", "response")
                    if v.get(k) is not None
                )
            )
        if len(self.violations) > limit:
            lines.append(f"... and {len(self.violations) - limit} more")
        if self.server_log_excerpt:
            lines.append("--- server log excerpt ---")
            lines.append(self.server_log_excerpt)
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k not in ("stats", "notes")}
        out["stats"] = {f"{row}/{col}": n for (row, col), n in sorted(self.stats.items())}
        out["notes"] = dict(self.notes)
        out["requests"] = self.requests
        out["writes"] = self.writes
        out["http_500s"] = self.http_500s
        out["lost_writes"] = self.lost_writes
        out["duplicates"] = self.duplicates
        out["over_commits"] = self.over_commits
        return out
