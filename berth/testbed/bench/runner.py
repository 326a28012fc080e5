"""A whole ``berth bench`` run: every host count, the table, the JSON file, the exit status."""

from __future__ import annotations

import os
import platform
import shutil
import signal
import tempfile
import time
from typing import Any

from berth.testbed.bench import log
from berth.testbed.bench.config import BenchConfig
from berth.testbed.bench.rounds import bench_round
from berth.testbed.bench.table import format_table
from berth.testbed.client import VERSION
from berth.testbed.errors import TestbedError
from berth.testbed.loopback import loopback_url
from berth.testbed.parallel import Stop
from berth.testbed.report import write_json
from berth.testbed.services.databases import Databases
from berth.testbed.services.server import Server


def json_document(config: BenchConfig, databases: Databases | None, results: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "config": {
            "url": config.url,
            "database": databases.kind if databases else None,
            "workers": None if config.url else config.workers,
            "hosts": config.hosts,
            "queries": config.queries,
            "clients": config.clients,
            "claims_seconds": config.claims_seconds,
            "create_clients": config.create_clients,
            "allocations": config.allocations,
            "pick_clients": config.pick_clients,
            "pick_seconds": config.pick_seconds,
            "group_size": config.group_size,
            "gang_clients": config.gang_clients,
            "gang_seconds": config.gang_seconds,
            "gang_sizes": config.gang_sizes,
            "microversion": VERSION,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        },
        "results": results,
    }


def failures(results: list[dict[str, Any]]) -> list[str]:
    """What makes the run fail (exit status 1)."""
    bad = []
    for r in results:
        if r["claims"]["errors"] or r["verification"]["violations"] or r["verification"]["usage_mismatches"]:
            bad.append(f"hosts={r['hosts']}: errors, violations or usage mismatches")
        if any(v["errors"] for v in r["candidates"].values()):
            bad.append(f"hosts={r['hosts']}: failed allocation candidate queries")
        basic = r["candidates"]["basic"]
        if r["hosts"] >= 50 and basic["allocation_requests"] != 50:
            bad.append(f"hosts={r['hosts']}: basic returned {basic['allocation_requests']} requests, not 50")
        bad += placement_failures(r)
        bad += gang_failures(r)
    return bad


def gang_failures(r: dict[str, Any]) -> list[str]:
    """The gang phase's part: errors, broken books, or a gang breaking its kind's rule."""
    bad = []
    for size, kinds in r.get("gangs", {}).get("sizes", {}).items():
        for kind, figures in kinds.items():
            if figures["errors"] or figures["over_commits"] or figures["usage_mismatches"]:
                bad.append(f"hosts={r['hosts']}: gangs of {size}, {kind}: errors, over-commits or usage mismatches")
            if figures["rule_violations"]:
                bad.append(f"hosts={r['hosts']}: gangs of {size}, {kind}: {figures['rule_violations']} violations")
    return bad


def placement_failures(r: dict[str, Any]) -> list[str]:
    """The pick-and-claim phase's part: errors or broken books either way, anti-affinity broken by a
    pick (the client-side loop cannot keep it under concurrency: its violations are a figure)."""
    bad = []
    picked, client_side = r["pick_and_claim"], r["client_side_claims"]
    for name, figures in (("pick and claim", picked), ("client-side loop", client_side)):
        if figures["errors"] or figures["anti_affinity"]["errors"]:
            bad.append(f"hosts={r['hosts']}: {name}: errors")
        if figures["violations"] or figures["usage_mismatches"]:
            bad.append(f"hosts={r['hosts']}: {name}: over-commits or usage mismatches")
    if picked["anti_affinity_violations"] or picked["weigh_all"]["failed"]:
        bad.append(f"hosts={r['hosts']}: pick and claim: anti-affinity violations or failed picks")
    quota = picked["with_quota"]
    if quota["errors"] or quota["violations"] or quota["usage_mismatches"] or quota["conflict_codes"]:
        bad.append(f"hosts={r['hosts']}: pick with a quota: errors, refusals or broken books")
    if picked["preemption"]["errors"]:
        bad.append(f"hosts={r['hosts']}: preempting picks: errors {picked['preemption']['error_samples']}")
    return bad


def _measure(config: BenchConfig, tmpdir: str, stop: Stop, servers: list[Server]) -> int:
    databases = None
    try:
        if config.url:
            config.url = loopback_url(config.url)
            if config.database:
                raise TestbedError("--database applies only to a server the bench starts; drop it or --url")
        else:
            databases = Databases(config.database, tmpdir, log)
        results = [
            bench_round(config, hosts, number, databases, tmpdir, stop, servers)
            for number, hosts in enumerate(config.hosts)
        ]
    finally:
        if databases is not None:
            databases.close()
    print(format_table(results), flush=True)
    if config.json:
        write_json(config.json, json_document(config, databases, results))
        log(f"results written to {config.json}")
    bad = failures(results)
    for line in bad:
        log(f"FAILED {line}")
    return 1 if bad else 0


def run_bench(config: BenchConfig) -> int:
    """Entry point of ``berth bench``: the exit status (0 good, 1 failed checks, 2 error, 130 interrupted)."""

    def on_sigterm(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    stop = Stop()
    servers: list[Server] = []
    tmpdir = tempfile.mkdtemp(prefix="berth-bench-")
    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        return _measure(config, tmpdir, stop, servers)
    except KeyboardInterrupt:
        log("interrupted; cleaning up")
        return 130
    except TestbedError as e:
        log(f"error: {e}")
        return 2
    finally:
        stop.set()
        signal.signal(signal.SIGTERM, previous)
        for server in servers:
            server.stop()
        shutil.rmtree(tmpdir, ignore_errors=True)
