"""Whole simulations: a real ``berth serve``, pooled hosts and agent processes, a seeded mix of
every server operation through the conductors' API, faults on; the run must end with no violation."""

from __future__ import annotations

import pytest

from berth.testbed.errors import TestbedError
from berth.testbed.failover.cluster import find_programs
from berth.testbed.sim.config import SimConfig
from berth.testbed.sim.run import run_sim

pytestmark = pytest.mark.slow


def assert_clean(report, ops):
    d = report.to_dict()
    assert d["operations"] + d["skipped"] >= ops
    assert d["violations"] == 0, (d["violation_list"], d["histories"])
    assert d["processes_exited"] == []
    assert d["worker_errors"] == 0, d["worker_error_list"]
    assert d["audit_findings"] == 0
    assert sum(d["faults"].values()) > 0
    assert set(d["invariant_checks"]) >= {"instance_allocations", "claims_mismatch", "over_capacity", "anti_affinity"}
    assert d["by_kind"]["build"]["done"] > 0


def test_ci_sized_simulation_on_sqlite_ends_without_violations(capfd):
    config = SimConfig(hosts=200, ops=3000, concurrency=16, faults=0.05, seed=11, workers=2, real_agents=3)
    assert_clean(run_sim(config), 3000)
    # After the last operation it says what it is doing: resumes, audit, invariants, teardown.
    said = [line.split("] ", 1)[-1] for line in capfd.readouterr().err.splitlines() if line.startswith("[sim ")]
    after = said[next(i for i, line in enumerate(said) if "operations in" in line) - 1 :]
    assert after[0].startswith("operations done; waiting for those still running")
    assert any(line.startswith("auditing the ") for line in after)
    assert any(line.startswith("reading the books") for line in after)
    assert after[-1].startswith("stopping the cloud")


def test_preemptible_load_under_a_quota_preempts_and_ends_without_violations():
    # 30 live servers a host aimed at: the cloud fills, and the builds above priority 0 (half of
    # them) preempt; the project may hold 98 % of the cloud's VCPUs. A preempting build is judged by
    # the usage it leaves, its victims (the project's own) gone, so the quota does not keep the
    # builds from preempting once the hosts are full. While a host is down its tree is avoided by
    # the picks, which keep preempting (they once took the Placement API's path then, and a run
    # whose agents' beats came late under load had no preemption at all).
    config = SimConfig(
        hosts=12,
        ops=800,
        concurrency=8,
        faults=0.05,
        seed=5,
        workers=2,
        real_agents=2,
        conductors=2,
        instances_per_host=30.0,
        preemptible=0.5,
        quota=0.98,
    )
    report = run_sim(config)
    assert_clean(report, 800)
    d = report.to_dict()
    assert d["preemptions"] > 0, {k: d[k] for k in ("by_kind", "faults", "quota_refusals", "reschedules")}
    # Every victim counted was ended and checked gone.
    assert d["victims_ended"] <= d["preemptions"] * 64
    assert d["invariant_checks"]["preempted_gone"] >= d["victims_ended"] > 0
    # The limit held at the end; whether the project reaches it (and builds are refused) depends on
    # how the preemptions and the faults fall in a run, so refusals are counted, not required.
    assert d["invariant_checks"]["quota"] == 1


def test_shorter_simulation_on_postgresql_with_several_workers():
    config = SimConfig(
        hosts=40, ops=300, concurrency=8, faults=0.05, seed=12, workers=3, real_agents=3, database="postgresql"
    )
    report = run_sim(config)
    assert_clean(report, 300)


def test_small_simulation_on_a_patroni_cluster_rides_through_failovers():
    """The service and the conductors' journal on a Patroni cluster's multi-host URLs; the primary
    killed (kill -9) beside some operations, the standby promoted while the others go on."""
    try:
        find_programs()
    except TestbedError as e:
        pytest.skip(f"{e} (scripts/test installs them)")
    config = SimConfig(hosts=40, ops=300, concurrency=16, faults=0.1, seed=3, database="patroni")
    report = run_sim(config)
    assert_clean(report, 300)
    assert report.to_dict()["faults"].get("failover", 0) >= 1
