"""``berth server|flavor|host|server-group|operation`` in-process against the live conductors: the
operator's commands as they print for people and for scripts, ``--wait`` following operations to
their end, and the failures said with what to do."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner
from clihelpers import UUID, as_json, berth_against, cleaned_after_evacuation, create
from livehelpers import free_port
from servicehelpers import LARGE, ended, ensure_flavors, wait_for

from berth.cli.compute.connection import Api
from berth.cli.main import cli
from berth.conductor.control.host_books import DOWN_FRESH_SECONDS

HOSTS = {"alpha", "beta", "gamma"}


@pytest.fixture(autouse=True)
def flavors(cloud):
    ensure_flavors(cloud.client())


@pytest.fixture
def berth(cloud):
    return berth_against(cloud)


def test_a_build_with_wait_prints_its_steps_and_ends_active(berth, cloud):
    built = berth("server", "create", "cli-web", "--flavor", "small", "--image-property", "os_type=linux", "--wait")
    lines = built.output.splitlines()
    assert re.fullmatch(rf"build {UUID} started", lines[0]), lines
    assert any(re.fullmatch(r"  step \w+ done", line) for line in lines), lines
    assert re.fullmatch(rf"build {UUID} done on (alpha|beta|gamma)", lines[-1]), lines

    shown = as_json(berth("server", "show", "cli-web", "-f", "json"))["server"]
    assert shown["status"] == "ACTIVE" and shown["OS-EXT-SRV-ATTR:host"] in HOSTS
    assert shown["image"]["properties"] == {"os_type": "linux"} and shown["allocations"]
    table = berth("server", "show", shown["id"]).stdout
    assert "server cli-web" in table and shown["OS-EXT-SRV-ATTR:host"] in table and "os_type=linux" in table
    assert "VCPU=1" in table  # the allocations table

    listed = berth("server", "list").stdout
    row = next(line for line in listed.splitlines() if shown["id"] in line)
    assert "cli-web" in row and "ACTIVE" in row and "small" in row
    by_host = as_json(berth("server", "list", "--host", shown["OS-EXT-SRV-ATTR:host"], "-f", "json"))
    assert shown["id"] in {s["id"] for s in by_host["servers"]}
    yaml_listed = berth("server", "list", "--status", "active", "-f", "yaml").stdout
    assert f"id: {shown['id']}" in yaml_listed

    deleted = berth("server", "delete", "cli-web", "--wait")
    assert re.search(rf"delete {UUID} done", deleted.output)
    gone = berth("server", "show", shown["id"], expect=1)
    assert "no server named or with id" in gone.output and "berth server list" in gone.output


def test_without_wait_the_operation_and_how_to_follow_it_are_printed(berth, cloud):
    started = berth("server", "create", "cli-quick", "--flavor", "small").stdout
    found = re.search(rf"server ({UUID}) \(cli-quick\) is building: operation ({UUID})", started)
    assert found, started
    assert f"berth operation show {found.group(2)}" in started
    assert ended(cloud.client(), found.group(2))["state"] == "done"
    shown = as_json(berth("operation", "show", found.group(2), "-f", "json"))["operation"]
    assert shown["kind"] == "build" and shown["server_id"] == found.group(1) and shown["steps_done"]
    table = berth("operation", "show", found.group(2)).stdout
    assert "steps done" in table and "build" in table
    berth("server", "delete", found.group(1), "--wait")


def test_a_resize_is_confirmed_and_another_reverted(berth, cloud):
    server = create(berth, "cli-resized")
    resized = berth("server", "resize", "cli-resized", "--flavor", LARGE["name"], "--wait")
    assert re.search(rf"resize {UUID} done", resized.output), resized.output
    shown = as_json(berth("server", "show", server["id"], "-f", "json"))["server"]
    assert shown["status"] == "VERIFY_RESIZE" and shown["flavor"]["original_name"] == "large"
    confirmed = berth("server", "confirm", "cli-resized", "--wait")
    shown = as_json(berth("server", "show", server["id"], "-f", "json"))["server"]
    assert shown["status"] == "ACTIVE" and shown["flavor"]["original_name"] == "large"
    # Each end names the host the server is left on.
    assert re.search(rf"confirm_resize {UUID} done on {shown['OS-EXT-SRV-ATTR:host']}", confirmed.output), (
        confirmed.output
    )

    ended_op = as_json(berth("server", "resize", server["id"], "--flavor", "small", "--wait", "-f", "json"))
    assert ended_op["operation"]["state"] == "done" and ended_op["operation"]["kind"] == "resize"
    reverted = berth("server", "revert", server["id"], "--wait")
    shown = as_json(berth("server", "show", server["id"], "-f", "json"))["server"]
    assert shown["status"] == "ACTIVE" and shown["flavor"]["original_name"] == "large"
    assert ended_op["operation"]["source"] == shown["OS-EXT-SRV-ATTR:host"]
    assert re.search(rf"revert_resize {UUID} done on {shown['OS-EXT-SRV-ATTR:host']}", reverted.output), reverted.output

    kinds = [
        o["kind"] for o in as_json(berth("operation", "list", "--server", "cli-resized", "-f", "json"))["operations"]
    ]
    assert sorted(kinds) == sorted(["build", "resize", "confirm_resize", "resize", "revert_resize"]), kinds
    listed = berth("operation", "list", "--server", server["id"], "--kind", "resize", "--state", "done").stdout
    assert listed.startswith("2 operations") and listed.count(" resize ") == 2
    berth("server", "delete", server["id"], "--wait")


def test_a_live_migration_moves_the_server(berth, cloud):
    server = create(berth, "cli-mover")
    moved = berth("server", "live-migrate", "cli-mover", "--wait")
    assert re.search(rf"live_migrat\w* {UUID} done on (alpha|beta|gamma)", moved.output), moved.output
    shown = as_json(berth("server", "show", server["id"], "-f", "json"))["server"]
    assert shown["status"] == "ACTIVE" and shown["OS-EXT-SRV-ATTR:host"] not in (server["OS-EXT-SRV-ATTR:host"], None)
    berth("server", "delete", server["id"], "--wait")


def test_a_build_that_fits_nowhere_exits_1_with_its_error(berth, cloud):
    berth("flavor", "create", "cli-huge", "--vcpus", "512", "--ram", "1048576")
    try:
        failed = berth("server", "create", "cli-nowhere", "--flavor", "cli-huge", "--wait", expect=1)
        assert re.search(rf"build {UUID} (failed|rolled back)", failed.output), failed.output
        assert "error:" in failed.output and "berth server show" in failed.output
    finally:
        for server in as_json(berth("server", "list", "-f", "json"))["servers"]:
            if server["name"] == "cli-nowhere":
                berth("server", "delete", server["id"], "--wait")
        berth("flavor", "delete", "cli-huge")


def test_flavors_are_created_listed_shown_given_properties_and_deleted(berth):
    made = as_json(
        berth(
            "flavor",
            "create",
            "cli-tiny",
            "--vcpus",
            "1",
            "--ram",
            "256",
            "--disk",
            "1",
            "--swap",
            "64",
            "--property",
            "hw:cpu_policy=shared",
            "-f",
            "json",
        )
    )["flavor"]
    assert made["vcpus"] == 1 and made["ram"] == 256 and made["swap"] == 64
    assert made["extra_specs"] == {"hw:cpu_policy": "shared"}
    row = next(line for line in berth("flavor", "list").stdout.splitlines() if "cli-tiny" in line)
    assert "256" in row and "hw:cpu_policy=shared" in row
    assert made["id"] in {f["id"] for f in as_json(berth("flavor", "list", "-f", "json"))["flavors"]}

    berth("flavor", "set", "cli-tiny", "--property", "hw:mem_page_size=large", "--property", "quota:x=1")
    shown = as_json(berth("flavor", "show", "cli-tiny", "-f", "json"))["flavor"]
    assert shown["extra_specs"] == {"hw:cpu_policy": "shared", "hw:mem_page_size": "large", "quota:x": "1"}
    unset = berth("flavor", "unset", "cli-tiny", "--property", "quota:x", "--property", "hw:cpu_policy").stdout
    assert "hw:mem_page_size=large" in unset and "quota:x" not in unset

    duplicate = berth("flavor", "create", "cli-tiny", "--vcpus", "1", "--ram", "256", expect=1)
    assert "berth.flavor.duplicate" in duplicate.output and "hint:" in duplicate.output
    assert "cli-tiny" in berth("flavor", "delete", "cli-tiny").stdout
    missing = berth("flavor", "show", "cli-tiny", expect=1)
    assert "404 berth.flavor.not_found" in missing.output and "`berth flavor list`" in missing.output
    bad = berth("flavor", "set", "small", "--property", "novalue", expect=2)
    assert "KEY=VALUE" in bad.output


def test_server_groups_are_created_joined_listed_and_deleted(berth):
    made = as_json(
        berth(
            "server-group",
            "create",
            "cli-spread",
            "--policy",
            "anti-affinity",
            "--max-server-per-host",
            "1",
            "-f",
            "json",
        )
    )["server_group"]
    assert made["policy"] == "anti-affinity" and made["rules"] == {"max_server_per_host": 1}
    row = next(line for line in berth("server-group", "list").stdout.splitlines() if "cli-spread" in line)
    assert made["id"] in row and "anti-affinity" in row

    member = create(berth, "cli-member", "--server-group", "cli-spread")
    assert member["server_groups"] == [made["id"]]
    assert member["id"] in berth("server-group", "show", "cli-spread").stdout
    in_use = berth("server-group", "delete", "cli-spread", expect=1)
    assert "409" in in_use.output and "hint:" in in_use.output
    berth("server", "delete", member["id"], "--wait")

    assert "deleted" in berth("server-group", "delete", made["id"]).stdout
    gone = berth("server-group", "show", "cli-spread", expect=1)
    assert "no server group named or with id" in gone.output and "berth server-group list" in gone.output


def test_hosts_are_listed_disabled_and_enabled(berth):
    listed = berth("host", "list").stdout
    for name in HOSTS:
        row = next(line for line in listed.splitlines() if line.strip("│ ").startswith(name))
        assert "enabled" in row and " up " in row and " s ago" in row
    hosts = {h["name"]: h for h in as_json(berth("host", "list", "-f", "json"))["hosts"]}
    assert hosts["gamma"]["zone"] == "zone-b"

    disabled = berth("host", "disable", "gamma", "--reason", "disk swap").stdout
    assert "disabled" in disabled and "disk swap" in disabled
    try:
        shown = as_json(berth("host", "show", "gamma", "-f", "json"))["host"]
        assert shown["status"] == "disabled" and shown["disabled_reason"] == "disk swap"
    finally:
        berth("host", "enable", "gamma")
    assert as_json(berth("host", "show", "gamma", "-f", "json"))["host"]["status"] == "enabled"

    up = berth("host", "evacuate", "gamma", expect=1)
    assert "409 berth.host.up" in up.output and "only a down host's servers are evacuated" in up.output
    missing = berth("host", "show", "nowhere", expect=1)
    assert "404 berth.host.not_found" in missing.output and "`berth host list`" in missing.output


def test_operations_are_listed_by_state_and_kind(berth):
    server = create(berth, "cli-listed")
    listed = as_json(berth("operation", "list", "--kind", "build", "--state", "done", "--limit", "500", "-f", "json"))
    assert server["id"] in {o["server_id"] for o in listed["operations"]}
    assert {o["kind"] for o in listed["operations"]} == {"build"}
    table = berth("operation", "list", "--server", server["id"]).stdout
    assert "1 operations" in table and "build" in table and "done" in table
    missing = berth("operation", "show", "00000000-0000-0000-0000-000000000000", expect=1)
    assert "404 berth.operation.not_found" in missing.output and "`berth operation list`" in missing.output
    berth("server", "delete", server["id"], "--wait")


def test_lists_are_read_page_after_page_newest_first(berth, cloud):
    made = [create(berth, f"cli-paged-{n}")["id"] for n in range(3)]
    api = Api(cloud.client(), "json")
    everyone = api.get("/servers?all_projects=1")["servers"]
    assert [s["id"] for s in everyone][:3] == made[::-1]
    # Pages of two, followed to the end, and a limit met across pages.
    assert api.listed("/servers", "servers", [("all_projects", "1")], page=2) == everyone
    assert [s["id"] for s in api.listed("/servers", "servers", [("all_projects", "1")], limit=3, page=2)] == made[::-1]
    builds = api.get("/operations?kind=build")["operations"]
    assert api.listed("/operations", "operations", [("kind", "build")], page=2) == builds
    newest = as_json(berth("server", "list", "--all-projects", "--limit", "2", "-f", "json"))["servers"]
    assert [s["id"] for s in newest] == made[:0:-1]
    assert "1 operations" in berth("operation", "list", "--kind", "build", "--limit", "1").stdout
    for server in made:
        berth("server", "delete", server, "--wait")


def test_a_busy_server_is_refused_with_the_operation_to_follow(berth, cloud):
    server = create(berth, "cli-busy")
    for agent in cloud.agents.values():
        agent.client.set_faults(spawn_seconds=2.0)
    try:
        started = berth("server", "migrate", "cli-busy").stdout
        operation_id = re.search(rf"started: operation ({UUID})", started).group(1)
        refused = berth("server", "shelve", "cli-busy", expect=1)
        assert "409 berth.server.busy" in refused.output, refused.output
        assert f"hint: another operation runs on it: follow it with `berth operation show {operation_id}`" in (
            refused.output
        )
        assert ended(cloud.client(), operation_id)["state"] == "done"
    finally:
        for agent in cloud.agents.values():
            agent.client.set_faults(spawn_seconds=0)
    berth("server", "confirm", server["id"], "--wait")
    berth("server", "delete", server["id"], "--wait")


def test_unknown_and_ambiguous_names_and_flavors_say_what_to_do(berth):
    unknown = berth("server", "show", "cli-nobody", expect=1)
    assert "no server named or with id 'cli-nobody'" in unknown.output and "`berth server list`" in unknown.output
    assert "Traceback" not in unknown.output

    nowhere = berth("server", "create", "cli-x", "--flavor", "no-such-flavor", expect=1)
    assert "400 berth.flavor.not_found" in nowhere.output and "`berth flavor list`" in nowhere.output
    bad_resize = berth("server", "resize", "cli-nobody", "--flavor", "small", expect=1)
    assert "no server named" in bad_resize.output

    twins = [create(berth, "cli-twin"), create(berth, "cli-twin")]
    ambiguous = berth("server", "delete", "cli-twin", expect=1)
    assert "2 servers are named 'cli-twin'" in ambiguous.output and "by its id" in ambiguous.output
    for twin in twins:
        assert twin["id"] in ambiguous.output
        berth("server", "delete", twin["id"], "--wait")


def test_several_servers_built_at_once_are_followed_together(berth):
    built = as_json(berth("server", "create", "cli-many", "--flavor", "small", "--count", "2", "--wait", "-f", "json"))
    names = sorted(s["name"] for s in built["servers"])
    assert names == ["cli-many-1", "cli-many-2"] and {s["status"] for s in built["servers"]} == {"ACTIVE"}
    for server in built["servers"]:
        berth("server", "delete", server["id"], "--wait")


def test_no_conductor_to_answer_says_how_to_start_one():
    url = f"http://127.0.0.1:{free_port()}"
    result = CliRunner().invoke(cli, ["host", "list", "--conductor", url], env={"BERTH_CONDUCTOR_URL": None})
    assert result.exit_code == 1
    assert f"no conductor answered at {url}" in result.output and "berth conductor --placement" in result.output
    missing_scheme = CliRunner().invoke(cli, ["host", "list", "--conductor", "127.0.0.1:1"])
    assert missing_scheme.exit_code == 2 and "needs its scheme" in missing_scheme.output
    too_few = CliRunner().invoke(cli, ["server", "create", "x", "--flavor", "f", "--count", "2", "--min-count", "3"])
    assert too_few.exit_code == 2 and "3 is above --count (2)" in too_few.output


def test_the_servers_of_a_down_host_are_evacuated_with_wait(berth, cloud):
    server = create(berth, "cli-evacuee", "--availability-zone", "zone-a")
    host = server["OS-EXT-SRV-ATTR:host"]
    agent = cloud.agents[host]
    agent.stop(sig=9)
    try:
        wait_for(lambda: as_json(berth("host", "show", host, "-f", "json"))["host"]["state"] == "down", what="down")
        assert " down " in berth("host", "list").stdout
        evacuated = berth("host", "evacuate", host, "--wait")
        assert re.search(rf"evacuat\w* {UUID} done on (alpha|beta)", evacuated.output), evacuated.output
        shown = as_json(berth("server", "show", server["id"], "-f", "json"))["server"]
        assert shown["status"] == "ACTIVE" and shown["OS-EXT-SRV-ATTR:host"] not in (host, None)
        nothing = berth("host", "evacuate", host).stdout
        assert f"no server of {host} to evacuate" in nothing
    finally:
        agent.start()
    cleaned_after_evacuation(berth, host, server["id"])


def _every_host_schedulable(berth) -> None:
    """Every host up and enabled as the conductors show it, and long enough that each conductor's
    own view of the hosts that are down (read again every ``DOWN_FRESH_SECONDS``) has it up too: a
    test before may have stopped and started one's agent."""
    wait_for(
        lambda: all(
            h["state"] == "up" and h["status"] == "enabled"
            for h in as_json(berth("host", "list", "-f", "json"))["hosts"]
            if h["name"] in HOSTS
        ),
        what="every host up and enabled",
    )
    time.sleep(DOWN_FRESH_SECONDS)


def test_a_multi_create_is_placed_whole_or_refused_with_nothing_made(berth, cloud):
    """Anti-affinity over three hosts: four servers at the least are refused with nothing made; two at
    the least are three, one on each host."""
    _every_host_schedulable(berth)
    berth("server-group", "create", "cli-gang", "--policy", "anti-affinity")
    made = []
    leases_before = _leases(cloud)
    try:
        refused = berth(
            "server", "create", "cli-gang", "--flavor", "small", "--count", "4", "--min-count", "4",
            "--server-group", "cli-gang", expect=1,
        )  # fmt: skip
        assert "409 berth.server.no_valid_host" in refused.output, refused.output
        assert "fewer than 4 can be placed" in refused.output and "--min-count" in refused.output
        listed = as_json(berth("server", "list", "--all-projects", "-f", "json"))["servers"]
        assert not [s for s in listed if s["name"].startswith("cli-gang")]
        assert _leases(cloud) == leases_before
        built = as_json(
            berth(
                "server",
                "create",
                "cli-gang",
                "--flavor",
                "small",
                "--count",
                "4",
                "--min-count",
                "2",
                "--server-group",
                "cli-gang",
                "--wait",
                "-f",
                "json",
            )
        )["servers"]
        made = [s["id"] for s in built]
        # (On a failure, the servers' faults say why.)
        assert len(built) == 3 and {s["status"] for s in built} == {"ACTIVE"}, built
        assert sorted(s["OS-EXT-SRV-ATTR:host"] for s in built) == sorted(HOSTS)
        # Every build's lease was confirmed.
        assert _leases(cloud) <= leases_before
    finally:
        for server_id in made:
            berth("server", "delete", server_id, "--wait")
        berth("server-group", "delete", "cli-gang")


def _leases(cloud) -> set[str]:
    return {lease["consumer_uuid"] for lease in cloud.placement.get("/berth/leases")["leases"]}


def test_a_multi_create_over_the_projects_quota_is_refused_saying_where_to_look(berth, cloud):
    """403 with the limit passed, a hint naming the quota commands (not the token's roles), and
    nothing made."""
    cloud.placement.request("PUT", "/berth/quotas/admin", {"limits": {"VCPU": 0}})
    try:
        refused = berth("server", "create", "over-quota", "--flavor", "small", "--count", "2", expect=1)
        assert "403 berth.quota.exceeded" in refused.output, refused.output
        assert "Quota exceeded for VCPU of project admin" in refused.output
        assert "hint: the project's quota does not allow it: `berth quota show PROJECT`" in refused.output
        listed = as_json(berth("server", "list", "--all-projects", "-f", "json"))["servers"]
        assert not [s for s in listed if s["name"].startswith("over-quota")]
    finally:
        cloud.placement.request("DELETE", "/berth/quotas/admin")


def test_wait_says_what_an_operation_waits_for_while_its_host_is_away(berth, cloud):
    """A revert whose source's agent died after the move: the revert gives the destination's side
    back, then waits for the source, the one host that can take the server back. ``--wait`` says so
    once rather than printing nothing until the agent is back, then follows the revert to its end."""
    server = create(berth, "cli-stranded")
    source = server["OS-EXT-SRV-ATTR:host"]
    berth("server", "migrate", server["id"], "--wait")
    agent = cloud.agents[source]
    agent.stop(sig=9)
    env = {**os.environ, "BERTH_CONDUCTOR_URL": ",".join(c.url for c in cloud.conductors)}
    env.pop("BERTH_TOKEN", None)
    command = [sys.executable, "-m", "berth.cli.main", "server", "revert", server["id"], "--wait"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
    said: list[str] = []
    try:
        while not any(line.startswith("  waiting: ") for line in said):
            said.append(lines.get(timeout=60).rstrip("\n"))
        assert "revert" in said[-1] and "Connection refused" in said[-1], said
    finally:
        agent.start()
    assert process.wait(timeout=90) == 0
    while not lines.empty():
        said.append(lines.get().rstrip("\n"))
    # Said once, though every try failed alike (each resume runs the steps again: each is said once
    # too); then the end, once the agent is back.
    assert sum(line.startswith("  waiting: ") for line in said) == 1, "\n".join(said)
    steps = [line for line in said if line.startswith("  step ")]
    assert len(steps) == len(set(steps)) == 4, "\n".join(said)
    assert re.fullmatch(rf"revert_resize {UUID} done on {source}", said[-1]), said
    berth("server", "delete", server["id"], "--wait")


def test_an_evacuation_says_which_servers_it_leaves_and_why(berth, cloud):
    """A shelved server stays on its host, which then goes down: an evacuation of the host, which
    moves only ACTIVE and ERROR servers, names it with the reason."""
    server = create(berth, "cli-shelved")
    host = server["OS-EXT-SRV-ATTR:host"]
    berth("server", "shelve", server["id"], "--wait")
    agent = cloud.agents[host]
    agent.stop(sig=9)
    try:
        wait_for(lambda: as_json(berth("host", "show", host, "-f", "json"))["host"]["state"] == "down", what="down")
        evacuated = berth("host", "evacuate", host).stdout
        assert f"{server['id']} left on {host}: " in evacuated, evacuated
        assert evacuated.endswith(f"no server of {host} to evacuate\n"), evacuated
        (left,) = as_json(berth("host", "evacuate", host, "-f", "json"))["left"]
        assert left["server_id"] == server["id"] and left["reason"] in evacuated
    finally:
        agent.start()
    wait_for(lambda: as_json(berth("host", "show", host, "-f", "json"))["host"]["state"] == "up", what="up again")
    berth("server", "delete", server["id"], "--wait")


def test_a_migration_whose_source_died_under_it_ends_and_its_host_is_evacuated(berth, cloud):
    """Found trying Berth as an operator: a migration whose source's agent was killed after the
    source had handed the server over could not be undone there, and stayed running for as long as
    the host was away, its server busy, so that it could be neither evacuated nor deleted. Now the
    migration ends once the host is seen down, the host's evacuation takes the server, and the host,
    once back, is put right (``clean_up_moved``, then the evacuation's own clean-up)."""
    server = create(berth, "cli-stranded-move")
    source = server["OS-EXT-SRV-ATTR:host"]
    others = [cloud.agents[name] for name in HOSTS if name != source]
    agent = cloud.agents[source]
    # The destination's spawn takes long enough for the source to be killed meanwhile, then fails.
    for other in others:
        other.client.set_faults(spawn_seconds=4.0, fail_next_spawns=1)
    try:
        operation = as_json(berth("server", "migrate", server["id"], "-f", "json"))["operation"]

        def shown() -> dict:
            return as_json(berth("operation", "show", operation["id"], "-f", "json"))["operation"]

        wait_for(lambda: "claim_dest" in shown()["steps_done"], what="the destination's claim")
        agent.stop(sig=9)
        wait_for(lambda: shown()["state"] != "running", what="the migration's end", timeout=60)
        assert shown()["state"] in ("failed", "rolled_back"), shown()
        for other in others:  # the host that was not the destination still has them
            other.client.set_faults(spawn_seconds=0.0, fail_next_spawns=0)
        back = as_json(berth("server", "show", server["id"], "-f", "json"))["server"]
        assert back["status"] == "ACTIVE" and back["OS-EXT-SRV-ATTR:host"] == source
        evacuated = berth("host", "evacuate", source, "--wait")
        assert re.search(rf"evacuat\w* {UUID} done on ", evacuated.output), evacuated.output
    finally:
        for other in others:
            other.client.set_faults(spawn_seconds=0.0, fail_next_spawns=0)
        agent.start()
    wait_for(lambda: as_json(berth("host", "show", source, "-f", "json"))["host"]["state"] == "up", what="up again")

    def cleaned_up() -> bool:
        listed = as_json(berth("operation", "list", "--server", server["id"], "-f", "json"))["operations"]
        states = {o["kind"]: o["state"] for o in listed}
        return states.get("clean_up_moved") == "done" and states.get("clean_up_evacuated") == "done"

    wait_for(cleaned_up, what="the source put right")
    moved = as_json(berth("server", "show", server["id"], "-f", "json"))["server"]
    assert moved["status"] == "ACTIVE" and moved["OS-EXT-SRV-ATTR:host"] not in (source, None)
    berth("server", "delete", server["id"], "--wait")


def test_an_offloaded_server_is_unshelved_into_the_zone_asked(berth, cloud):
    server = create(berth, "cli-shelved")
    berth("server", "shelve", "cli-shelved", "--wait")
    berth("server", "shelve-offload", "cli-shelved", "--wait")
    both = berth(
        "server", "unshelve", "cli-shelved", "--availability-zone", "zone-b", "--no-availability-zone", expect=2
    )
    assert "not both" in both.output, both.output
    berth("server", "unshelve", "cli-shelved", "--availability-zone", "zone-b", "--wait")
    shown = as_json(berth("server", "show", server["id"], "-f", "json"))["server"]
    assert shown["status"] == "ACTIVE" and shown["OS-EXT-SRV-ATTR:host"] == "gamma", shown
    berth("server", "delete", server["id"], "--wait")
