"""A small simulation in the fast loop: every operation through the conductors' API, two
``berth conductor`` processes, one of them killed (kill -9) and started again while operations run,
the others taking its operations over; the run must end with no violation."""

from __future__ import annotations

import os
import shutil

from berth.testbed.sim.config import SimConfig
from berth.testbed.sim.run import run_sim


def test_a_small_simulation_through_the_api_with_a_conductor_killed_ends_without_violations():
    config = SimConfig(
        hosts=20,
        ops=200,
        concurrency=8,
        faults=0.05,
        seed=5,
        workers=2,
        conductors=2,
        # The conductor's crash drawn far more often than by default, so that a run this short has
        # one: about 10 faults are drawn, each a crash 9 times in 10 (at a weight of 60, 44 in 100,
        # and about one run in 80 had none).
        fault_weights={"conductor_crash": 600},
        keep_files=True,
    )
    d = run_sim(config).to_dict()
    kept = d["kept_folder"]
    assert kept is not None and os.path.isfile(os.path.join(kept, "operations.log"))
    assert {"conductor-0.log", "conductor-1.log"} <= set(os.listdir(kept))
    shutil.rmtree(kept)
    assert d["violations"] == 0, (d["violation_list"], d["histories"])
    assert d["operations"] + d["skipped"] >= 200
    assert d["faults"].get("conductor_crash", 0) >= 1, d["faults"]
    assert d["processes_exited"] == []
    assert d["worker_errors"] == 0, d["worker_error_list"]
    assert d["audit_findings"] == 0
    assert d["logs_with_tracebacks"] == []
    assert d["by_kind"]["build"]["done"] > 0
    assert d["conductors"] == 2
    cpu = d["control_plane_cpu"]
    assert set(cpu["seconds"]) == {"service", "conductors"}
    assert all(seconds > 0 for seconds in cpu["seconds"].values())
    assert cpu["ms_per_op"] > 0
    harness = d["harness_cpu"]
    assert set(harness["seconds"]) == {"hosts", "simulator"}
    assert all(seconds > 0 for seconds in harness["seconds"].values())
