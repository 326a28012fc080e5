"""What a simulation tells: operations per second by kind, conflicts, retries, reschedules, faults
by kind, the invariants checked and every violation; as Rich tables and as JSON."""

from __future__ import annotations

import os
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from berth.testbed.sim.checks.invariants import Verdict


@dataclass
class Tally:
    """Counted while the run goes, from every worker thread."""

    done: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    seconds: dict[str, float] = field(default_factory=dict)
    reschedules: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    # Turns on which no operation could be drawn (every instance that allowed one was busy).
    skips: int = 0
    # Confirms and reverts that failed after some of their steps (then asked again), by kind.
    half_finished: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def operation(self, kind: str, ok: bool, seconds: float, attempts: int) -> None:
        with self.lock:
            (self.done if ok else self.refused)[kind] += 1
            self.seconds[kind] = self.seconds.get(kind, 0.0) + seconds
            self.reschedules += attempts

    def skipped(self) -> None:
        with self.lock:
            self.skips += 1

    def fault(self, kind: str) -> None:
        with self.lock:
            self.faults[kind] += 1

    @property
    def operations(self) -> int:
        return sum(self.done.values()) + sum(self.refused.values())


@dataclass
class SimReport:
    config: dict[str, Any]
    tally: Tally
    elapsed: float
    conflicts: int
    retries: int
    audit_findings: int
    verdict: Verdict
    setup_seconds: float = 0.0
    log_problems: list[str] = field(default_factory=list)
    # Consumer named by a violation -> its instance's operations, as the journal has them.
    histories: dict[str, list[str]] = field(default_factory=dict)
    # Processes of the cloud found dead after the workload (the server, a host pool, an agent).
    exited: list[str] = field(default_factory=list)
    # What the workload's threads raised that is no operation's outcome (a bug of the run itself).
    errors: list[str] = field(default_factory=list)
    # CPU seconds of the control plane over the operations, by part: "service" (berth serve and its
    # workers), "conductors" (every berth conductor process, the scheduler in them).
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    # CPU seconds of what the run simulates around the control plane, over the operations: "hosts"
    # (the host pools and agent processes) and "simulator" (this process: the workload's threads).
    # Not the control plane's, but they share the machine's cores with it.
    harness_cpu_seconds: dict[str, float] = field(default_factory=dict)
    conductors: int = 0
    # Operations still running in the journal after the finish's wait.
    left_running: int = 0
    # The consumers the service's preempting picks removed, and those whose servers the conductors
    # ended for it (``--preemptible``).
    preemptions: int = 0
    victims_ended: int = 0
    # Operations refused by the run's project's quota (``--quota``).
    quota_refusals: int = 0
    # The run's folder, when it was kept (a problem found, or ``--keep-files``).
    kept_folder: str | None = None

    @property
    def violations(self) -> int:
        return len(self.verdict.violations)

    @property
    def ops_per_s(self) -> float:
        return self.tally.operations / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def cpu_ms_per_op(self) -> float:
        """Milliseconds of the control plane's CPU per operation."""
        return self._ms_per_op(self.cpu_seconds)

    def _ms_per_op(self, seconds: dict[str, float]) -> float:
        return 1000 * sum(seconds.values()) / self.tally.operations if self.tally.operations else 0.0

    def to_dict(self) -> dict[str, Any]:
        t = self.tally
        kinds = sorted(set(t.done) | set(t.refused))
        return {
            "config": self.config,
            "kept_folder": self.kept_folder,
            "setup_seconds": round(self.setup_seconds, 1),
            "seconds": round(self.elapsed, 1),
            "operations": t.operations,
            "ops_per_s": round(self.ops_per_s, 1),
            "conductors": self.conductors,
            "control_plane_cpu": {
                "seconds": {k: round(v, 1) for k, v in sorted(self.cpu_seconds.items())},
                "ms_per_op": round(self.cpu_ms_per_op, 2),
            },
            "harness_cpu": {
                "seconds": {k: round(v, 1) for k, v in sorted(self.harness_cpu_seconds.items())},
                "ms_per_op": round(self._ms_per_op(self.harness_cpu_seconds), 2),
            },
            "by_kind": {
                k: {
                    "done": t.done[k],
                    "refused": t.refused[k],
                    "ops_per_s": round((t.done[k] + t.refused[k]) / self.elapsed, 2) if self.elapsed else 0.0,
                    "mean_ms": round(1000 * t.seconds.get(k, 0.0) / max(1, t.done[k] + t.refused[k]), 1),
                }
                for k in kinds
            },
            "conflicts": self.conflicts,
            "retries": self.retries,
            "reschedules": t.reschedules,
            "preemptions": self.preemptions,
            "victims_ended": self.victims_ended,
            "quota_refusals": self.quota_refusals,
            "skipped": t.skips,
            "half_finished": dict(sorted(t.half_finished.items())),
            "faults": dict(sorted(t.faults.items())),
            "audit_findings": self.audit_findings,
            "invariant_checks": dict(sorted(self.verdict.checks.items())),
            "violations": self.violations,
            "violation_list": [v.to_dict() for v in self.verdict.violations],
            "histories": self.histories,
            "logs_with_tracebacks": self.log_problems,
            "processes_exited": self.exited,
            "left_running": self.left_running,
            "worker_errors": len(self.errors),
            "worker_error_list": self.errors[:20],
        }

    def print(self, console: Console) -> None:
        d = self.to_dict()
        ops = Table(title=f"{d['operations']} operations in {d['seconds']} s: {d['ops_per_s']} ops/s")
        for column in ("operation", "done", "refused", "ops/s", "mean ms"):
            ops.add_column(column, justify="left" if column == "operation" else "right")
        for kind, row in d["by_kind"].items():
            ops.add_row(kind, str(row["done"]), str(row["refused"]), f"{row['ops_per_s']:.2f}", f"{row['mean_ms']:.0f}")
        console.print(ops)
        cpu = d["control_plane_cpu"]
        parts = ", ".join(f"{k} {v} s" for k, v in cpu["seconds"].items())
        console.print(
            f"control plane CPU: {cpu['ms_per_op']} ms per operation ({parts}; {d['conductors']} conductor processes)"
        )
        harness = d["harness_cpu"]
        parts = ", ".join(f"{k} {v} s" for k, v in harness["seconds"].items())
        console.print(f"simulated hosts' and simulator's CPU: {harness['ms_per_op']} ms per operation ({parts})")
        console.print(
            f"conflicts (409s answered by the service): {d['conflicts']}   database retries: {d['retries']}   "
            f"reschedules: {d['reschedules']}   audit findings: {d['audit_findings']}   "
            f"confirms/reverts failed midway: {sum(d['half_finished'].values())}   "
            f"preemptions: {d['preemptions']} ({d['victims_ended']} victims ended)   "
            f"refused by the quota: {d['quota_refusals']}"
        )
        faults = Table(title="faults injected")
        faults.add_column("fault")
        faults.add_column("count", justify="right")
        for kind, n in d["faults"].items():
            faults.add_row(kind, str(n))
        console.print(faults)
        checks = Table(title=f"invariants: {self.violations} violation(s)")
        checks.add_column("invariant")
        checks.add_column("checks", justify="right")
        checks.add_column("violations", justify="right")
        broken = Counter(v.invariant for v in self.verdict.violations)
        for name, n in d["invariant_checks"].items():
            checks.add_row(name, str(n), str(broken[name]))
        console.print(checks)
        for v in self.verdict.violations[:50]:
            console.print(f"[red]{v.invariant}[/red] consumer={v.consumer} provider={v.provider}: {v.detail}")
            for line in self.histories.get(v.consumer or "", []):
                console.print(f"    {line}", markup=False, highlight=False)
        if self.violations > 50:
            console.print(f"... and {self.violations - 50} more (all in --json)")
        for name in self.exited:
            console.print(f"[red]{name} had exited before the end of the run[/red]")
        for path in self.log_problems:
            # A run with nothing wrong removes its folder: the log is named, not pointed at.
            where = (
                path
                if self.kept_folder
                else f"{os.path.basename(path)} (removed with the run's files; --keep-files keeps them)"
            )
            console.print(f"[yellow]a traceback is logged in {where}[/yellow]")
