"""``berth bench`` end to end at a tiny size: it builds its layout, preloads allocations, measures,
verifies and reports; the figures themselves are not judged here (timing goals live in the bench)."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from berth.cli.bench import add_bench_arguments

DOCS = Path(__file__).resolve().parent.parent / "docs" / "performance.md"

# The JSON document's keys: docs/performance.md and the results of earlier rounds rely on them.
CONFIG_KEYS = {
    "url",
    "database",
    "workers",
    "hosts",
    "queries",
    "clients",
    "claims_seconds",
    "create_clients",
    "allocations",
    "microversion",
    "python",
    "cpus",
    "platform",
    "time",
}
RESULT_KEYS = {
    "hosts",
    "cpu_check_ms",
    "build",
    "preload",
    "server_max_candidates",
    "candidates",
    "claims",
    "memory",
    "verification",
}
BUILD_KEYS = {
    "providers",
    "seconds",
    "providers_per_second",
    "steal_percent",
    "hosts",
    "gpu_children",
    "sharing_providers",
}
VARIANT_KEYS = {
    "query",
    "queries",
    "errors",
    "median_ms",
    "p95_ms",
    "allocation_requests",
    "expected_allocation_requests",
    "requests_using_sharing_provider",
    "problems",
}
CLAIMS_KEYS = {
    "claims",
    "conflicts",
    "errors",
    "no_candidates",
    "seconds",
    "claims_per_second",
    "conflict_codes",
    "error_samples",
    "candidates_median_ms",
    "put_median_ms",
    "put_p95_ms",
    "providers_claimed",
    "steal_percent",
}
VERIFICATION_KEYS = {"providers_checked", "violations", "usage_mismatches", "violation_samples", "mismatch_samples"}
MEMORY_KEYS = {"master_pid", "processes", "pss_total_mb", "rss_total_mb", "rss_master_mb", "rss_max_worker_mb"}


@pytest.mark.slow
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
    document = json.loads(report.read_text())
    result = document["results"][0]
    assert set(document) == {"config", "results"}
    assert set(document["config"]) == CONFIG_KEYS
    assert set(result) == RESULT_KEYS
    assert set(result["build"]) == BUILD_KEYS
    assert set(result["candidates"]) == {"basic", "traits", "granular_nested", "forbidden_agg_sharing", "unlimited"}
    assert all(set(entry) == VARIANT_KEYS for entry in result["candidates"].values())
    assert set(result["claims"]) == CLAIMS_KEYS
    assert set(result["verification"]) == VERIFICATION_KEYS
    assert set(result["memory"]) == MEMORY_KEYS
    assert set(result["preload"]) == {"records", "seconds", "records_per_second", "consumers"}
    lines = done.stdout.splitlines()
    assert lines[0].split() == [
        "hosts",
        "providers",
        "create/s",
        "basic",
        "ms",
        "traits",
        "ms",
        "granular_nested",
        "ms",
        "forbidden_agg_sharing",
        "ms",
        "unlimited",
        "ms",
        "claims/s",
        "conflicts",
        "errors",
        "violations",
        "memory",
        "MB",
        "cpu",
        "check",
        "ms",
        "steal",
        "%",
    ]
    assert set(lines[1]) == {"-", " "} and len(lines[1]) == len(lines[0]) == len(lines[2])
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
    from berth.testbed.cpu import cpu_times, stolen_percent

    before = [100, 0, 50, 800, 10, 0, 5, 35]
    after = [160, 0, 70, 880, 10, 0, 10, 70]  # 200 ticks in all, 35 of them stolen
    assert stolen_percent(before, after) == 17.5
    assert stolen_percent(before, before) is None
    assert stolen_percent(None, after) is None
    now = cpu_times()
    assert now is not None and len(now) == 8 and all(value >= 0 for value in now)


def test_options_are_those_the_docs_list():
    parser = argparse.ArgumentParser()
    add_bench_arguments(parser)
    options = {o for action in parser._actions for o in action.option_strings if o.startswith("--")} - {"--help"}
    documented = set(re.findall(r"^\| `(--[a-z-]+)", DOCS.read_text(), re.MULTILINE))
    assert (
        options
        == documented
        == {
            "--url",
            "--database",
            "--workers",
            "--hosts",
            "--queries",
            "--clients",
            "--claims-seconds",
            "--create-clients",
            "--allocations",
            "--json",
        }
    )
    args = parser.parse_args(["--hosts", "10,1_000", "--claims-seconds", "2.5"])
    assert (args.hosts, args.claims_seconds, args.queries, args.clients, args.allocations) == (
        [10, 1000],
        2.5,
        200,
        8,
        0,
    )


@pytest.mark.slow
def test_without_pycurl_the_bench_names_the_extra_to_install():
    # The server and every other command must import without it; the bench says what to install.
    code = (
        "import sys; sys.modules['pycurl'] = None\n"
        "from berth.cli.main import main\n"
        "sys.exit(main(['bench', '--hosts', '1']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "pycurl" in done.stderr and "berth[bench]" in done.stderr
