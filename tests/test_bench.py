"""``berth bench`` end to end at a tiny size: it builds its layout, preloads allocations, measures,
verifies and reports; the figures themselves are not judged here (timing goals live in the bench)."""

from __future__ import annotations

import json
import subprocess
import sys


def test_bench_runs_and_reports(tmp_path):
    report = tmp_path / "bench.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "berth.cli.main",
            "bench",
            "--hosts",
            "60",
            "--queries",
            "3",
            "--claims-seconds",
            "1",
            "--clients",
            "4",
            "--allocations",
            "90",
            "--workers",
            "2",
            "--json",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "memory MB" in done.stdout and "cpu check ms" in done.stdout
    result = json.loads(report.read_text())["results"][0]
    # 60 hosts, a GPU child for every fifth, one sharing provider for hosts i % 10 == 1.
    assert result["build"]["providers"] == 60 + 12 + 1
    assert result["preload"] == {**result["preload"], "records": 90, "consumers": 30}
    assert result["candidates"]["basic"]["allocation_requests"] == 50
    assert all(not v["problems"] for v in result["candidates"].values()), result["candidates"]
    assert result["claims"]["claims"] > 0 and result["claims"]["errors"] == 0
    assert result["verification"]["violations"] == 0
    assert result["verification"]["usage_mismatches"] == 0
    assert result["cpu_check_ms"]["before"] > 0 and result["cpu_check_ms"]["after"] > 0
    assert "steal %" in done.stdout
    for phase in (result["build"], result["claims"]):
        assert 0 <= phase["steal_percent"] <= 100
    memory = result["memory"]
    assert memory["processes"] == 3 and 0 < memory["pss_total_mb"] <= memory["rss_total_mb"]


def test_stolen_share_of_cpu_time():
    from berth.cli.bench import cpu_times, stolen_percent

    before = [100, 0, 50, 800, 10, 0, 5, 35]
    after = [160, 0, 70, 880, 10, 0, 10, 70]  # 200 ticks in all, 35 of them stolen
    assert stolen_percent(before, after) == 17.5
    assert stolen_percent(before, before) is None
    assert stolen_percent(None, after) is None
    now = cpu_times()
    assert now is not None and len(now) == 8 and all(value >= 0 for value in now)
