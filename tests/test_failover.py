"""A PostgreSQL failover under load: a real Patroni cluster (etcd and two PostgreSQL nodes with
synchronous replication), two ``berth serve`` processes on its multi-host URL, claimers writing
allocations through both, and picking hosts with a lease that they confirm, leave to expire or
release; the primary's PostgreSQL is killed with SIGKILL and Patroni promotes the standby.  Every
acknowledged write must survive, none may be applied twice or reported failed although it landed,
no provider may be over-committed, every lease must be released once and on time (not before its
expiry by the database's clock, not long after it, a confirmed one never), and the servers must
serve writes again without a restart."""

from __future__ import annotations

import pytest

from berth.testbed.errors import TestbedError
from berth.testbed.failover.cluster import find_programs
from berth.testbed.stress.config import KINDS, StressConfig
from berth.testbed.stress.runner import run_stress

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def patroni():
    try:
        find_programs()
    except TestbedError as e:
        pytest.skip(f"{e} (scripts/test installs them)")


def test_failover_under_load_loses_no_acknowledged_write(patroni):
    config = StressConfig(
        fault="failover", servers=2, workers=2, concurrency=6, seconds=16.0, providers=12, seed=20261127
    )
    result = run_stress(config)
    report = result.table() + "\n" + result.violation_report()
    assert len(result.faults) == 1, report
    assert "primary after" in result.faults[0]["detail"], report
    assert result.violations == [], report
    assert result.lost_writes == 0, report
    assert result.duplicates == 0, report
    assert result.over_commits == 0, report
    assert result.http_500s == 0, report
    # The servers were not restarted, yet writes were acknowledged again after the primary died.
    assert result.outages[0] is not None, report
    assert result.count("2xx", KINDS) > 0, report
    # Picks with a lease, under the same failover: each of the three plans was followed.
    leases = result.leases
    assert leases["confirmed"] > 0 and leases["expired"] > 0 and leases["released by the client"] > 0, report
    assert leases["checked before expiry"] > 0 and leases["re-claimed"] > 0, report
    assert result.leases_released_early == 0, report
    assert result.leases_released_late == 0, report
    assert result.leases_released_twice == 0, report
    assert leases["confirmed but released"] == 0, report
