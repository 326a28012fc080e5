"""A whole stress run: the server, the layout, the claimers and faults, the audit, the report."""

from __future__ import annotations

import bisect
import random
import re
import shutil
import tempfile
import time
import uuid as uuidlib
from collections import Counter
from typing import Any

from berth.testbed.client import Client
from berth.testbed.errors import TestbedError
from berth.testbed.failover.cluster import PatroniCluster, start_cluster
from berth.testbed.loopback import loopback_url
from berth.testbed.report import write_json
from berth.testbed.services.databases import Databases, backend_of
from berth.testbed.services.postgres import PostgresServer
from berth.testbed.services.server import START_TIMEOUT, Server
from berth.testbed.stress import log
from berth.testbed.stress.audit import audit_consumers, audit_providers
from berth.testbed.stress.claimers import ClaimerPool
from berth.testbed.stress.cloud import build_layout, remove
from berth.testbed.stress.config import FAULTS, REQUEST_TIMEOUT, RESOLVE_GRACE, StressConfig
from berth.testbed.stress.faults import check_fault, fault_times, inject
from berth.testbed.stress.leasing import summarise
from berth.testbed.stress.replay import replay
from berth.testbed.stress.result import StressResult

# The workers log "Worker exiting" at once but then take seconds of CPU to wind down; once the audit
# is done nothing is left to wait for.
STOP_GRACE = 1.0
# How long after a fault the load is searched for its gap without service.
OUTAGE_WINDOW = 30.0


def main(config: StressConfig) -> int:
    """Entry point of ``berth stress``: the exit status (0 clean, 1 violations, 2 error, 130 interrupted)."""
    try:
        result = run_stress(config)
    except TestbedError as e:
        log(f"error: {e}")
        return 2
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    print(result.table(), flush=True)
    if result.violations:
        print(result.violation_report(), flush=True)
    if config.json:
        write_json(config.json, result.as_dict())
    return 0 if result.ok else 1


def run_stress(
    config: StressConfig, *, postgres: PostgresServer | None = None, server: Server | None = None
) -> StressResult:
    """Set up, run the load and the faults, audit; the in-process entry point (tests call this).

    ``postgres``: a throwaway PostgreSQL that ``restart-postgres`` may restart.  ``server``: an already
    started :class:`Server` to use (and leave running) instead of starting one; several runs may share
    it, each with providers of its own.  ``--fault failover`` starts a Patroni cluster of its own
    (:mod:`berth.testbed.failover`) and ``config.servers`` servers on it.  Raises :class:`TestbedError`
    when the setup fails; violations are in the result.
    """
    if config.fault not in FAULTS:
        raise TestbedError(f"unknown fault {config.fault!r}; one of {', '.join(FAULTS)}")
    tmpdir = tempfile.mkdtemp(prefix="berth-stress-")
    failover = config.fault == "failover" and server is None and not config.url
    databases = Databases(config.database, tmpdir, log) if server is None and not config.url and not failover else None
    cluster: PatroniCluster | None = None
    own_servers: list[Server] = []
    try:
        if failover:
            log(f"starting a Patroni cluster of {config.postgres_nodes} PostgreSQL nodes")
            cluster = start_cluster(config.postgres_nodes)
            own_servers = start_servers(config, cluster.url, tmpdir, "postgresql (Patroni)")
        elif databases is not None:
            url = databases.new(f"stress_{uuidlib.uuid4().hex[:8]}")
            postgres = databases.postgres or postgres
            own_servers = start_servers(config, url, tmpdir, databases.kind)
        if own_servers:
            server = own_servers[0]
        check_fault(config, server, postgres, cluster)
        if server is not None:
            servers = own_servers or [server]
            result = new_result(config, backend_of(server.database_url), server.workers)
            offsets = [len(s.log_text()) for s in servers]
            load_and_audit(config, [s.url for s in servers], server, postgres, result, cluster)
            for s, offset in zip(servers, offsets, strict=True):
                read_server_log(s, s.log_text()[offset:], result, config.server_log if s is server else None)
        else:
            base = loopback_url(config.url or "")
            result = new_result(config, "server at " + base, None)
            load_and_audit(config, [base], None, postgres, result, None)
        return result
    finally:
        for s in own_servers:
            s.stop(grace=STOP_GRACE)
        if databases is not None:
            databases.close()
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(tmpdir, ignore_errors=True)


def start_servers(config: StressConfig, url: str, tmpdir: str, kind: str) -> list[Server]:
    """``config.servers`` servers on the database at ``url``, one after the other (the first creates
    the schema)."""
    servers: list[Server] = []
    try:
        for _ in range(config.servers):
            s = Server(url, config.workers, tmpdir)
            servers.append(s)
            s.start()
            log(f"berth serve ({kind}, {config.workers} workers) at {s.url}, log {s.logpath}")
    except BaseException:
        for s in servers:
            s.stop(grace=STOP_GRACE)
        raise
    return servers


def new_result(config: StressConfig, backend: str, workers: int | None) -> StressResult:
    return StressResult(
        backend=backend,
        workers=workers,
        concurrency=config.concurrency,
        fault=config.fault,
        seconds_planned=None if config.operations else config.seconds,
    )


_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)): (.*)$")


def summarise_exceptions(text: str) -> dict[str, int]:
    """Exception lines of the server log's tracebacks, counted (digits masked: ports, pids, ids)."""
    found: Counter[str] = Counter()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _EXCEPTION_LINE.match(line)
        if m and i > 0 and lines[i - 1].startswith(" "):
            found[re.sub(r"\d+", "N", line)[:300]] += 1
    return dict(found.most_common())


def read_server_log(server: Server, text: str, result: StressResult, copy_to: str | None) -> None:
    """The tracebacks in what the server logged during the run, added to those of the other servers;
    a copy of the whole log if asked."""
    tracebacks = text.count("Traceback (most recent call last)")
    result.server_tracebacks += tracebacks
    found = Counter(result.server_exceptions)
    found.update(summarise_exceptions(text))
    result.server_exceptions = dict(found.most_common())
    if tracebacks and not result.server_log_excerpt:
        start = text.index("Traceback (most recent call last)")
        head = text.rfind("\n", 0, max(0, start - 1))
        result.server_log_excerpt = "\n".join(text[head + 1 :].splitlines()[:80])
    if copy_to:
        shutil.copyfile(server.logpath, copy_to)


def run_claimers(
    config: StressConfig,
    pool: ClaimerPool,
    server: Server | None,
    postgres: PostgresServer | None,
    rng: random.Random,
    result: StressResult,
    cluster: PatroniCluster | None = None,
) -> None:
    """Let the claimers go, inject the faults on time, collect every claimer's report."""
    pool.start(None if config.operations else config.seconds)
    log(
        f"{config.concurrency} claimers running"
        + (f" for {config.seconds:g}s" if not config.operations else f", {config.operations} rounds each")
        + (f", fault {config.fault} x{config.fault_count}" if config.fault != "none" else "")
    )
    t0 = time.monotonic()
    for at in fault_times(config):
        pool.collect(t0 + at)
        if pool.finished:
            break
        began = time.monotonic() - t0
        wall = time.time()
        detail = inject(config, server, postgres, rng, cluster)
        if cluster is not None:
            wall = cluster.crashed_at  # the SIGKILLs, after finding the primary
        result.faults.append({"kind": config.fault, "at": began, "wall": wall, "detail": detail})
        log(f"fault at {began:.1f}s: {detail}")
    if not config.operations:
        pool.collect(t0 + config.seconds)
        pool.stop.set()
    pool.collect(time.monotonic() + RESOLVE_GRACE + REQUEST_TIMEOUT + 60)
    result.elapsed = time.monotonic() - t0
    if not pool.finished:
        raise TestbedError("claimers did not finish in time")


def load_and_audit(
    config: StressConfig,
    bases: list[str],
    server: Server | None,
    postgres: PostgresServer | None,
    result: StressResult,
    cluster: PatroniCluster | None,
) -> None:
    """Build the layout through the first of ``bases``, run the claimers over all of them, audit."""
    base = bases[0]
    seed = config.seed if config.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    client = Client(base, timeout=REQUEST_TIMEOUT)
    try:
        layout = build_layout(client, config.providers, uuidlib.uuid4().hex[:8])
        result.providers = len(layout["all"])
        log(
            f"layout: {config.providers} hosts, {len(layout['gpus'])} GPU children, 1 sharing disk provider; "
            f"seed {seed}"
        )
        pool = ClaimerPool(config, bases, layout, rng)
        try:
            run_claimers(config, pool, server, postgres, rng, result, cluster)
        finally:
            pool.close()
        collected = pool.collected
        for index in sorted(collected):
            data = collected[index]
            result.stats.update({tuple(k): v for k, v in data["stats"].items()})
            result.violations.extend(data["problems"])
            if data["unresolved"]:
                result.notes["consumers never read back"] += len(data["unresolved"])
        if server is not None and not server.wait_answering(START_TIMEOUT):
            raise TestbedError(f"the server does not answer after the load:\n{server.log_tail()}")
        log("auditing")
        actual, provider_violations = audit_providers(client, layout)
        result.violations.extend(provider_violations)
        known: set[str] = set()
        result.outages = outages(result.faults, collected)
        for index in sorted(collected):
            violations, info = replay(index, collected[index]["events"], actual)
            result.violations.extend(violations)
            result.notes.update(info["notes"])
            known |= info["consumers"]
        result.leases = lease_summary(collected, result.violations)
        result.violations.extend(audit_consumers(client, actual, known, rng))
        result.consumers_seen = len(known)
        result.consumers_present = len(actual)
        if config.url and not config.keep:
            remove(client, layout, sorted(actual))
    finally:
        client.close()


def lease_summary(collected: dict[int, dict[str, Any]], violations: list[dict[str, Any]]) -> dict[str, Any]:
    """The counts of every claimer's leases; "released twice": the consumers claimed again after their
    lease was released whose claim the log's replay found taken away (a second release)."""
    found = summarise([rec for index in sorted(collected) for rec in collected[index].get("leases", [])])
    reclaimed = found.pop("reclaimed consumers")
    details = [v.get("detail", "") for v in violations if v["what"].endswith("contradicts the log")]
    found["released twice"] = sum(1 for c in reclaimed if any(c in d for d in details))
    return found


def outages(faults: list[dict[str, Any]], collected: dict[int, dict[str, Any]]) -> list[float | None]:
    """For each fault, the seconds without service: the longest time between two writes acknowledged
    one after the other (by any claimer, by the time their answers came) from just before the fault
    to ``OUTAGE_WINDOW`` seconds after it or the next fault; None when none was acknowledged after it.  (Answers to
    writes committed just before a kill still arrive after it, so the first acknowledgement after the
    fault says nothing.)"""
    acks = sorted(e[2] for data in collected.values() for e in data["events"] if e[0] == "write" and e[4] == "ack")
    found: list[float | None] = []
    for k, fault in enumerate(faults):
        kill = fault["wall"]
        end = min(kill + OUTAGE_WINDOW, faults[k + 1]["wall"] if k + 1 < len(faults) else float("inf"))
        start = max(0, bisect.bisect_left(acks, kill) - 1)  # the last acknowledgement before the kill
        window = [a for a in acks[start:] if a <= end]
        if not window or window[-1] < kill:
            found.append(None)
            continue
        if window[0] >= kill:
            window.insert(0, kill)
        found.append(max(b - a for a, b in zip(window, window[1:], strict=False)))
    return found
