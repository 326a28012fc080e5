"""A whole simulation: the cloud started, the workload and its faults run with a progress bar (the
control plane's CPU measured over it), what killed conductors left finished, every agent audited,
the books read and the invariants checked."""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import requests
import sqlalchemy as sa
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from berth.conductor.journal import Operation, operations
from berth.scheduler.request.request_spec import RequestSpec
from berth.testbed.report import Log, write_json
from berth.testbed.services.databases import Databases
from berth.testbed.sim.checks.books import read_books
from berth.testbed.sim.checks.invariants import Expected, LiveInstance, check
from berth.testbed.sim.cloud.faults import Faults
from berth.testbed.sim.cloud.layout import Layout, make_layout
from berth.testbed.sim.cloud.processes import Cloud
from berth.testbed.sim.config import SimConfig
from berth.testbed.sim.instances import DELETED, DELETING, OFFLOADED, RESIZED, Instances
from berth.testbed.sim.quota import QUOTA_EXCEEDED, set_quota
from berth.testbed.sim.reporting.cpu import CpuMeter
from berth.testbed.sim.reporting.report import SimReport, Tally
from berth.testbed.sim.workload import OPERATIONS_LOG, Workload

log = Log("sim")
# Agents audited at once at the end.
AUDITORS = 8
# The usual memory file system of Linux.
MEMORY_FOLDER = "/dev/shm"


def run_sim(config: SimConfig, console: Console | None = None) -> SimReport:
    console = console or Console(stderr=True)
    folder = tempfile.mkdtemp(prefix="berth-sim-", dir=_memory_folder())
    databases = Databases(config.database, folder, log)
    began = time.monotonic()
    layout = make_layout(config.hosts, config.real_agents, config.seed)
    service = databases.new("sim")
    # On PostgreSQL or a Patroni cluster the conductors' database is one of the same server, through
    # the same restarts and failovers as the service's; else a SQLite file beside the service's.
    ours = databases.postgres is not None or databases.cluster is not None
    journal = databases.new("conductors") if ours else f"sqlite:///{folder}/conductors.sqlite"
    cloud = Cloud(layout, service, config, folder, journal)
    operations_log = _log_operations(os.path.join(folder, "operations.log"))
    meter = CpuMeter({"service": cloud.server_pids, "conductors": cloud.conductor_pids, "hosts": cloud.host_pids})
    try:
        cloud.start(log)
        vcpu_limit = None
        if config.quota is not None:
            assert cloud.placement is not None
            vcpu_limit = set_quota(cloud.placement, config.quota)
            log(f"the run's project may hold {vcpu_limit} VCPUs")
        setup = time.monotonic() - began
        log(f"{config.hosts} hosts up in {setup:.1f} s ({dict(layout.kinds())})")
        tally = Tally()
        faults = Faults(
            config.faults,
            cloud,
            tally,
            databases.postgres,
            databases.cluster,
            before_kill=meter.sample,
            weights=config.fault_weights,
        )
        workload = Workload(config, layout, cloud, journal, faults, tally)
        before = _metrics(cloud.server.url)
        meter.start()
        cpu_before = {**meter.totals(), "simulator": time.process_time()}
        started = time.monotonic()
        with Progress(
            TextColumn("[bold]sim"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
        ) as progress:
            task = progress.add_task("operations", total=config.ops)
            workload.run(lambda: progress.advance(task))
        elapsed = time.monotonic() - started
        cpu_after = {**meter.totals(), "simulator": time.process_time()}
        meter.close()
        used = {k: cpu_after[k] - cpu_before[k] for k in cpu_after}
        cpu = {k: used[k] for k in ("service", "conductors")}
        harness = {k: used[k] for k in ("hosts", "simulator")}
        log("operations done; waiting for those still running (those of killed conductors taken over)")
        left = workload.finish()
        log(f"{tally.operations} operations in {elapsed:.1f} s; {left} left running after the resumes")
        exited = cloud.exited()
        after = _metrics(cloud.server.url)
        log(f"auditing the {len(cloud.urls)} hosts' agents")
        findings = _audit(cloud, log)
        log("reading the books of the service and of every agent, and checking the invariants")
        pools = {h.name: layout.pools[h.pool][0] if h.pool is not None else None for h in layout.hosts}
        books = read_books(cloud.server.url, cloud.agents_of_thread, pools)
        verdict = check(books, replace(expected(workload.instances, workload, layout), vcpu_limit=vcpu_limit))
        for error in workload.errors[:20]:
            log(f"worker error: {error}")
        named = [c for v in verdict.violations for c in [v.consumer, *_UUID.findall(v.detail)] if c]
        histories = _histories(workload, named)
        report = SimReport(
            config.to_dict(),
            tally,
            elapsed,
            conflicts=after.get("conflicts", 0) - before.get("conflicts", 0),
            retries=after.get("retries", 0) - before.get("retries", 0),
            audit_findings=findings,
            verdict=verdict,
            setup_seconds=setup,
            histories=histories,
            exited=exited,
            errors=list(workload.errors),
            cpu_seconds=cpu,
            harness_cpu_seconds=harness,
            left_running=left,
            conductors=len(cloud.conductors),
            preemptions=len(workload.preempted.victims),
            victims_ended=len(workload.preempted.ended),
            quota_refusals=_quota_refusals(workload) if vcpu_limit is not None else 0,
        )
    finally:
        meter.close()
        log("stopping the cloud: agents, host pools, conductors and the server")
        report_logs = cloud.stop()
        databases.close()
        OPERATIONS_LOG.removeHandler(operations_log)
        operations_log.close()
    report.log_problems = report_logs
    if report.violations or report.exited or report.left_running or config.keep_files:
        # What explains a failure is in the processes' logs and the databases: kept. (A log with a
        # traceback is not one: a conductor logs one for each resume that waits for a host.)
        log(f"the run's files are kept in {folder}")
        report.kept_folder = folder
    else:
        shutil.rmtree(folder, ignore_errors=True)
    return report


def _log_operations(path: str) -> logging.Handler:
    """What each of the run's requests got back, and how its operation ended, in ``path``."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    OPERATIONS_LOG.addHandler(handler)
    OPERATIONS_LOG.setLevel(logging.INFO)
    OPERATIONS_LOG.propagate = False
    return handler


def _memory_folder() -> str | None:
    """Where the run's files go: a memory file system when the system has one. The simulated hosts
    (hundreds of claim stores, each syncing every claim) would otherwise share the one disk that a
    real cloud's hosts each have of their own, and wait on it in turn."""
    shm = Path(MEMORY_FOLDER)
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def expected(instances: Instances, workload: Workload, layout: Layout) -> Expected:
    """What the run believes, as the invariants take it."""
    config = layout.scheduler_config
    live: dict[str, LiveInstance] = {}
    gone: set[str] = set()
    in_flight: set[str] = set()
    for uuid, instance in instances.every().items():
        if instance.state in (DELETED, OFFLOADED) or instance.host is None:
            gone.add(uuid)
            continue
        if instance.state == DELETING:
            continue  # its delete failed midway, and again at the end: what it holds is neither live nor gone
        move = instance.move if instance.state == RESIZED else None
        live[uuid] = LiveInstance(
            instance.host,
            _resources(instance.server.spec(config)),
            migration=move.migration if move else None,
            source=move.source if move else None,
            old_resources=_resources(move.old.spec(config)) if move else {},
        )
        if move:
            in_flight.add(move.migration)
    migrations = set(_migrations(workload))
    with workload.groups.lock:
        groups = {g: list(m) for g, m in workload.groups.members.items()}
    return Expected(
        live,
        gone,
        migrations - in_flight,
        groups,
        preempted=set(workload.preempted.ended),
        preempted_running=set(workload.preempted.unsettled),
    )


def _quota_refusals(workload: Workload) -> int:
    """The operations that ended refused by the project's quota, or with a host refusing for it."""
    query = sa.select(operations.c.error, operations.c.attempts)
    with workload.journal.engine.connect() as conn:
        rows = conn.execute(query).all()
    return sum(1 for r in rows if QUOTA_EXCEEDED in f"{r.error or ''} {r.attempts or ''}")


def _migrations(workload: Workload) -> dict[str, str]:
    """Every migration consumer the run's operations used -> its instance (one read of the journal)."""
    query = sa.select(operations.c.instance_uuid, operations.c.request)
    with workload.journal.engine.connect() as conn:
        rows = conn.execute(query).all()
    return {str(r.request["migration_uuid"]): r.instance_uuid for r in rows if r.request.get("migration_uuid")}


def _histories(workload: Workload, consumers: list[str]) -> dict[str, list[str]]:
    """For each consumer named by a violation (an instance, or a move's migration), the journal's
    operations of its instance, oldest first: what a violation is to be explained by."""
    by_migration = _migrations(workload)
    histories: dict[str, list[str]] = {}
    for consumer in dict.fromkeys(consumers):
        instance = by_migration.get(consumer, consumer)
        histories[consumer] = [
            f"{op.kind} {op.id} {op.state} step={op.step or '-'} {_where(op)}"
            + (f" attempts={len(op.attempts)}" if op.attempts else "")
            + (f" error={op.error}" if op.error else "")
            for op in workload.journal.for_instance(instance)
        ]
    return histories


def _where(op: Operation) -> str:
    s, r = op.selections, op.request
    parts = [f"{k}={v}" for k, v in (("source", r.get("source")), ("host", s.get("host") or r.get("host"))) if v]
    if s.get("dest"):
        parts.append(f"dest={s['dest']}")
    if r.get("migration_uuid"):
        parts.append(f"migration={r['migration_uuid']}")
    return " ".join(parts)


def _resources(spec: RequestSpec) -> dict[str, int]:
    total: dict[str, int] = {}
    for group in spec.groups:
        for rc, n in group.resources.items():
            total[rc] = total.get(rc, 0) + n
    return {rc: n for rc, n in total.items() if n}


def _audit(cloud: Cloud, say: Any) -> int:
    """Every agent audits its host (finishing what a crash interrupted); the findings counted."""

    def audit(name: str) -> list[Any]:
        found: list[Any] = cloud.agents_of_thread()[name].audit(heal=False).get("findings") or []
        return found

    findings = 0
    with ThreadPoolExecutor(AUDITORS) as pool:
        for name, found in zip(cloud.urls, pool.map(audit, cloud.urls), strict=True):
            if found:
                findings += len(found)
                say(f"audit of {name}: {found}")
    return findings


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_SAMPLE = re.compile(r"^(\w+)(\{[^}]*\})?\s+([0-9.eE+-]+)$")


def _metrics(url: str) -> dict[str, int]:
    """409s the service answered and transactions it retried, summed over its workers."""
    try:
        text = requests.get(f"{url}/metrics", headers={"X-Auth-Token": "admin"}, timeout=30).text
    except requests.RequestException:
        return {}
    figures = {"conflicts": 0, "retries": 0}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match:
            continue
        name, labels, value = match.group(1), match.group(2) or "", float(match.group(3))
        if name == "berth_http_requests_total" and 'status="409"' in labels:
            figures["conflicts"] += int(value)
        elif name == "berth_db_transaction_retries_total":
            figures["retries"] += int(value)
    return figures


def main(config: SimConfig) -> int:
    console = Console()
    report = run_sim(config, Console(stderr=True))
    report.print(console)
    if config.json:
        write_json(config.json, report.to_dict())
    return 1 if report.violations or report.exited else 0
