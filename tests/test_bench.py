"""``berth bench`` end to end at a tiny size: it builds its layout, preloads allocations, measures,
verifies and reports; the figures themselves are not judged here (timing goals live in the bench)."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

import click
import pytest

from berth.cli.load.bench import bench_command
from berth.testbed.bench.config import BenchConfig
from berth.testbed.bench.phases.candidates import ROUNDS, rounds_of

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
    "pick_clients",
    "pick_seconds",
    "group_size",
    "gang_clients",
    "gang_seconds",
    "gang_sizes",
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
    "worst_layout",
    "pick_and_claim",
    "client_side_claims",
    "gangs",
}
WORST_VARIANTS = {
    "nothing_fits",
    "beyond_max_unit",
    "sharing_only",
    "rare_trait",
    "rare_aggregate",
    "limit_1000",
    "wide_tree",
}
# The pick-and-claim phase's figures, the same for both ways of placing (pick adds its weigh-all ones).
PLACING_KEYS = {
    "placements",
    "placements_per_s",
    "p50_ms",
    "p99_ms",
    "conflicts",
    "conflict_codes",
    "no_valid_host",
    "errors",
    "error_samples",
    "requests",
    "requests_per_placement",
    "seconds",
    "clients",
    "anti_affinity",
    "violations",
    "usage_mismatches",
    "providers_checked",
    "anti_affinity_violations",
    "over_commit_samples",
    "anti_affinity_samples",
}
PICK_KEYS = PLACING_KEYS | {"weigh_all_median_ms", "weigh_all_p95_ms", "weigh_all", "with_quota", "preemption"}
# The gang phase's figures of one size and kind.
GANG_KEYS = {
    "gangs",
    "gangs_per_s",
    "placements",
    "placements_per_s",
    "p50_ms",
    "p99_ms",
    "conflicts",
    "conflict_codes",
    "no_valid_host",
    "errors",
    "error_samples",
    "requests",
    "seconds",
    "over_commits",
    "usage_mismatches",
    "providers_checked",
    "over_commit_samples",
    "gangs_checked",
    "rule_violations",
    "rule_samples",
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
            "--pick-seconds",
            "1",
            "--pick-clients",
            "4",
            "--group-size",
            "5",
            "--gang-seconds",
            "1",
            "--gang-clients",
            "3",
            "--gang-sizes",
            "4,12",
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
    assert (
        set(result["candidates"])
        == {
            "basic",
            "traits",
            "granular_nested",
            "forbidden_agg_sharing",
            "unlimited",
        }
        | WORST_VARIANTS
    )
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
    _check_worst_queries(result, done.stdout)
    _check_pick_and_claim(result, done.stdout)
    _check_gangs(result, done.stdout)


def _check_gangs(result, stdout):
    # 60 hosts: racks of 40 (two), a zone each.
    gangs = result["gangs"]
    assert {k: gangs[k] for k in ("clients", "racks", "zones", "rack_hosts", "max_skew")} == {
        "clients": 3,
        "racks": 2,
        "zones": 2,
        "rack_hosts": 40,
        "max_skew": 1,
    }
    assert set(gangs["sizes"]) == {"4", "12"}
    for size, kinds in gangs["sizes"].items():
        assert list(kinds) == ["plain", "within", "spread_over", "anti_affinity"]
        for kind, figures in kinds.items():
            assert set(figures) == GANG_KEYS, (size, kind)
            assert figures["errors"] == 0 and figures["conflicts"] == 0, (size, kind, figures)
            assert figures["over_commits"] == 0 and figures["usage_mismatches"] == 0
            assert figures["rule_violations"] == 0 and figures["gangs_checked"] == figures["gangs"]
            assert figures["placements"] == figures["gangs"] * int(size)
            assert figures["requests"] == figures["gangs"] + figures["no_valid_host"]
    # The first runs find room (the cloud fills as the runs add up).
    first = gangs["sizes"]["4"]["plain"]
    assert first["gangs"] > 0 and 0 < first["p50_ms"] <= first["p99_ms"] and first["providers_checked"] > 0
    rows = [line.split() for line in stdout.splitlines() if line.startswith("   60  ") and len(line.split()) == 11]
    assert [row[1:3] for row in rows] == [[size, kind] for size in ("4", "12") for kind in kinds]


def _check_worst_queries(result, stdout):
    # 60 hosts: cn-3 has the rare trait, cn-7 the rare aggregate, cn-9 eight PCI devices; the
    # six hosts i % 10 == 1 share a disk pool.
    assert result["worst_layout"]["wide_tree_hosts"] == 1 and result["worst_layout"]["providers"] == 8
    counts = {name: result["candidates"][name]["allocation_requests"] for name in WORST_VARIANTS}
    assert counts == {
        "nothing_fits": 0,
        "beyond_max_unit": 0,
        "sharing_only": 6,
        "rare_trait": 1,
        "rare_aggregate": 1,
        "limit_1000": 66,
        "wide_tree": 50,
    }
    assert result["candidates"]["sharing_only"]["requests_using_sharing_provider"] == 6
    for name in WORST_VARIANTS:
        entry = result["candidates"][name]
        assert entry["errors"] == 0 and 0 < entry["median_ms"] <= entry["p95_ms"], (name, entry)
    assert "nothing_fits ms" in stdout and "wide_tree ms" in stdout


def _check_pick_and_claim(result, stdout):
    picked, client_side = result["pick_and_claim"], result["client_side_claims"]
    assert set(picked) == PICK_KEYS and set(client_side) == PLACING_KEYS
    for figures in (picked, client_side):
        assert figures["placements"] > 0 and figures["placements_per_s"] > 0, figures
        assert 0 < figures["p50_ms"] <= figures["p99_ms"]
        assert figures["errors"] == 0 and figures["violations"] == 0 and figures["usage_mismatches"] == 0
        assert figures["providers_checked"] > 0 and figures["clients"] == 4
        grouped = figures["anti_affinity"]
        assert grouped["placements"] > 0 and grouped["group_size"] == 5 and grouped["errors"] == 0
        assert grouped["groups"] >= grouped["placements"] / 5
    # Every pick placed the whole server on one host, and the service kept every group apart.
    assert picked["conflicts"] == 0 and picked["anti_affinity_violations"] == 0
    assert picked["requests"] == picked["placements"] + picked["no_valid_host"]
    weighed = picked["weigh_all"]
    assert weighed["picks"] == 3 and weighed["trees_fitted"] == [60] and weighed["failed"] == 0
    assert 0 < picked["weigh_all_median_ms"] <= picked["weigh_all_p95_ms"]
    # The pick's servers again under a quota on their project that never refuses, and without, in
    # alternating rounds: every pick checked, the cost over all the rounds, in blocks of four.
    quota = picked["with_quota"]
    assert quota["placements"] > 0 and quota["placements_per_s"] > 0 and quota["errors"] == 0
    assert quota["conflict_codes"] == {} and quota["violations"] == 0 and quota["usage_mismatches"] == 0
    assert [r["quota"] for r in quota["rounds"]] == [True, False, False, True] * 3
    assert all(r["placements"] > 0 and r["errors"] == 0 and r["violations"] == 0 for r in quota["rounds"])
    assert quota["placements"] == sum(r["placements"] for r in quota["rounds"])
    with_quota = statistics.median(r["placements_per_s"] for r in quota["rounds"] if r["quota"])
    assert quota["placements_per_s"] == round(with_quota, 1)
    without = statistics.median(r["placements_per_s"] for r in quota["rounds"] if not r["quota"])
    assert quota["without_placements_per_s"] == round(without, 1)
    pairs = zip(
        [r["placements_per_s"] for r in quota["rounds"] if r["quota"]],
        [r["placements_per_s"] for r in quota["rounds"] if not r["quota"]],
        strict=True,
    )
    pairs = list(pairs)
    assert quota["pair_cost_percents"] == [round(100 * (1 - on / off), 1) for on, off in pairs]

    def cost(some):
        return round(100 * (1 - sum(on for on, _ in some) / sum(off for _, off in some)), 1)

    assert quota["block_cost_percents"] == [cost(pairs[0:2]), cost(pairs[2:4]), cost(pairs[4:6])]
    assert quota["cost_percent"] == cost(pairs)
    # A pick that preempts, into hosts filled with consumers of the default priority, beside a plain one.
    preemption = picked["preemption"]
    assert preemption["hosts"] == 20 and preemption["errors"] == 0, preemption
    assert preemption["victims"] == 20 and preemption["priority"] == 10
    plain, preempting = preemption["plain_median_ms"], preemption["preempting_median_ms"]
    assert plain > 0 and 0 < preempting <= preemption["preempting_max_ms"]
    assert preemption["cost_ratio"] == round(preempting / plain, 2)
    placing = [line.split() for line in stdout.splitlines() if line.startswith("   60  ")]
    kinds = ("pick", "pick+quota", "client-side")
    assert [row[1] for row in placing if row[1] in kinds] == list(kinds)


def test_stolen_share_of_cpu_time():
    from berth.testbed.cpu import cpu_times, stolen_percent

    before = [100, 0, 50, 800, 10, 0, 5, 35]
    after = [160, 0, 70, 880, 10, 0, 10, 70]  # 200 ticks in all, 35 of them stolen
    assert stolen_percent(before, after) == 17.5
    assert stolen_percent(before, before) is None
    assert stolen_percent(None, after) is None
    now = cpu_times()
    assert now is not None and len(now) == 8 and all(value >= 0 for value in now)


def _bench_config(arguments: list[str]) -> BenchConfig:
    """The run ``berth bench ARGUMENTS`` asks for, as its command line parses it."""
    return BenchConfig(**bench_command.make_context("bench", arguments).params)


def test_options_are_those_the_docs_list():
    options = {o for param in bench_command.params for o in param.opts if o.startswith("--")}
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
            "--pick-clients",
            "--pick-seconds",
            "--group-size",
            "--gang-clients",
            "--gang-seconds",
            "--gang-sizes",
            "--json",
        }
    )
    args = _bench_config(["--hosts", "10,1_000", "--claims-seconds", "2.5"])
    assert (args.hosts, args.claims_seconds, args.queries, args.clients, args.allocations) == (
        [10, 1000],
        2.5,
        200,
        8,
        0,
    )
    assert (args.pick_clients, args.pick_seconds, args.group_size) == (16, 10.0, 10)
    assert (args.gang_clients, args.gang_seconds, args.gang_sizes) == (16, 10.0, [10, 100])
    assert _bench_config(["--gang-sizes", "1,1000"]).gang_sizes == [1, 1000]
    assert _bench_config([]).hosts == [1000]
    assert _bench_config(["--hosts", "5", "--hosts", "7,8"]).hosts == [7, 8]  # the last one given counts


@pytest.mark.parametrize(
    "arguments",
    [["--hosts", "0"], ["--hosts", "ten"], ["--hosts", ","], ["--workers", "0"], ["--claims-seconds", "0"]]
    + [["--allocations", "-1"], ["--pick-seconds", "-2"], ["--colour"]]
    + [["--gang-sizes", "0"], ["--gang-sizes", "1001"], ["--gang-seconds", "0"], ["--gang-clients", "0"]],
)
def test_a_malformed_option_is_a_usage_error(arguments):
    with pytest.raises(click.UsageError):
        bench_command.make_context("bench", arguments)


def test_group_members_are_handed_out_one_group_at_a_time():
    from berth.testbed.bench.phases.pick_phase import Members

    members = Members(3)
    groups = [members.next_group() for _ in range(7)]
    assert groups[:3] == [groups[0]] * 3 and groups[3:6] == [groups[3]] * 3 and groups[6] not in groups[:6]
    assert members.groups == [groups[0], groups[3], groups[6]] and len(set(members.groups)) == 3


def test_the_worst_queries_expect_what_the_layout_gives():
    from berth.testbed.bench.cloud import HOST_INVENTORY, host_spec
    from berth.testbed.bench.phases.worst_queries import (
        BEYOND_MAX_UNIT,
        TOO_MUCH_MEMORY,
        worst_expected_counts,
        worst_queries,
    )

    specs = [host_spec(i, ["shared"], "rare") for i in range(250)]
    assert [s.name for s in specs if "CUSTOM_BENCH_RARE" in s.traits] == ["cn-3", "cn-103", "cn-203"]
    assert [s.name for s in specs if "rare" in s.aggregates] == ["cn-7", "cn-107", "cn-207"]
    assert not any(s.children for s in specs if s.name.endswith("-3") or s.name.endswith("-7"))
    expected = worst_expected_counts(250, 1000)
    assert expected == {
        "nothing_fits": 0,
        "beyond_max_unit": 0,
        "sharing_only": 25,
        "rare_trait": 3,
        "rare_aggregate": 3,
        "limit_1000": 275,
        "wide_tree": 50,
    }
    assert worst_expected_counts(5, 1000)["wide_tree"] == 0
    # Above every host's max_unit, within every host's room; nothing_fits beyond the room too.
    memory = HOST_INVENTORY["MEMORY_MB"]
    room = (memory["total"] - memory["reserved"]) * memory["allocation_ratio"]
    assert memory["max_unit"] < BEYOND_MAX_UNIT <= room < TOO_MUCH_MEMORY
    assert "member_of=agg-uuid&" in worst_queries({"rare_aggregate": "agg-uuid"})["rare_aggregate"]


def test_the_baselines_anti_affinity_breaks_are_said_as_its_figures_not_as_violations():
    from berth.testbed.bench.phases.placement_checks import anti_affinity_lines
    from berth.testbed.bench.phases.placing import ClientSideClaimer, Picker

    sample = {"group": "g1", "host": "h1", "members": 2}
    baseline = anti_affinity_lines(ClientSideClaimer.name, [sample])
    assert len(baseline) == 1
    assert "VIOLATION" not in baseline[0].upper() and "baseline" in baseline[0] and str(sample) in baseline[0]
    assert anti_affinity_lines(Picker.name, [sample]) == [f"  ANTI-AFFINITY VIOLATION by pick_and_claim: {sample}"]


def test_each_gang_rule_is_checked_against_the_hosts_its_members_are_on():
    from berth.testbed.bench.phases.gang_phase import gang_violations
    from berth.testbed.bench.phases.placing import Placement

    rack_of = {"h1": "r1", "h2": "r1", "h3": "r2", "h4": "r3"}
    zone_of = {"h1": "z1", "h2": "z1", "h3": "z2", "h4": "z3"}
    zones = ["z1", "z2", "z3"]

    def gang(name, *hosts):
        return [Placement(f"{name}-{n}", {host: {"VCPU": 2}}, host, name) for n, host in enumerate(hosts)]

    def broken(kind, *gangs):
        found = gang_violations(kind, [m for g in gangs for m in g], rack_of, zone_of, zones)
        assert found["gangs_checked"] == len(gangs)
        return found["violations"], [sample["gang"] for sample in found["violation_samples"]]

    apart, together = gang("apart", "h1", "h2", "h3"), gang("together", "h1", "h3", "h1")
    assert broken("anti_affinity", apart, together) == (1, ["together"])
    one_rack, two_racks = gang("one", "h1", "h2", "h1"), gang("two", "h2", "h3")
    assert broken("within", one_rack, two_racks) == (1, ["two"])
    # Every zone counts: two members in z1 and none in z3 is a skew of 2; a host in no zone breaks it.
    level, skewed, outside = gang("level", "h1", "h3", "h4", "h2"), gang("skewed", "h1", "h2", "h3"), gang("out", "x")
    assert broken("spread_over", level, skewed, outside) == (2, ["skewed", "out"])
    # Plain gangs have no rule.
    assert broken("plain", together, two_racks, skewed) == (0, [])


def test_a_gang_violation_or_over_commit_fails_the_run():
    from berth.testbed.bench.runner import gang_failures

    clean = {"errors": 0, "over_commits": 0, "usage_mismatches": 0, "rule_violations": 0}
    result = {"hosts": 60, "gangs": {"sizes": {"10": {"plain": clean, "within": clean}}}}
    assert gang_failures(result) == []
    result["gangs"]["sizes"]["10"]["within"] = {**clean, "rule_violations": 2}
    assert gang_failures(result) == ["hosts=60: gangs of 10, within: 2 violations"]
    result["gangs"]["sizes"]["10"]["within"] = {**clean, "over_commits": 1}
    assert gang_failures(result) == ["hosts=60: gangs of 10, within: errors, over-commits or usage mismatches"]


@pytest.mark.parametrize("queries", [1, 5, 10, 23, 100, 101])
def test_each_variants_requests_are_split_into_even_rounds(queries):
    shares = rounds_of(queries)
    assert sum(shares) == queries
    assert len(shares) == min(ROUNDS, queries)
    assert max(shares) - min(shares) <= 1
