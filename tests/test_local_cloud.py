"""``berth cloud``: the whole small cloud in one command, used through the conductors' API, then
stopped with Ctrl-C, leaving nothing running; and a port already taken, refused before anything starts."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
from livehelpers import free_port

from berth.cli.services.cloud_processes import group_members
from berth.clients.conductor import ConductorClient
from berth.testbed.processes import process_tree

ROOT = Path(__file__).resolve().parent.parent


def berth_cloud(*arguments: str, cwd: Path) -> subprocess.Popen[str]:
    environment = {name: value for name, value in os.environ.items() if not name.startswith("BERTH_")}
    return subprocess.Popen(
        [sys.executable, "-m", "berth.cli.main", "cloud", *arguments],
        cwd=cwd,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def refused(*arguments: str, cwd: Path) -> list[str]:
    """``berth cloud ARGUMENTS`` refused at start: exit status 1; the lines it said."""
    process = berth_cloud(*arguments, cwd=cwd)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 1, output
    return output.strip().splitlines()


def lines_of(process: subprocess.Popen[str]) -> queue.Queue[str]:
    """The process's output, line by line, as it comes."""
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    return lines


def wait_for_line(lines: queue.Queue[str], word: str, timeout: float, seen: list[str]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        seen.append(line)
        if word in line:
            return
    raise AssertionError(f"no {word!r} within {timeout} s:\n{''.join(seen)}")


def start_time(pid: int) -> str | None:
    """The process's start time (field 22 of /proc/N/stat), which tells it from a later one of the same
    pid; None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def ended(client: ConductorClient, operation_id: str, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        operation = client.get(f"/operations/{operation_id}")["operation"]
        if operation["state"] != "running":
            return operation
        time.sleep(0.2)
    raise AssertionError(f"operation {operation_id} still running after {timeout} s")


def test_the_cloud_builds_a_server_and_stops_everything_on_ctrl_c(tmp_path):
    placement_port, conductor_port = free_port(), free_port()
    folder = tmp_path / "cloud"
    process = berth_cloud(
        "--folder",
        str(folder),
        "--hosts",
        "2",
        "--placement-port",
        str(placement_port),
        "--conductor-port",
        str(conductor_port),
        cwd=tmp_path,
    )
    seen: list[str] = []
    lines = lines_of(process)
    started: dict[int, str | None] = {}
    groups: set[int] = set()
    try:
        wait_for_line(lines, "ready", 150, seen)
        wait_for_line(lines, "Ctrl-C", 10, seen)
        output = "".join(seen)
        assert "berth server create web --flavor m1.small --wait" in output
        assert f"http://127.0.0.1:{placement_port}/dashboard" in output
        assert str(folder / "logs") in output

        started.update({pid: start_time(pid) for pid in process_tree(process.pid)[1:]})
        # The service's and the conductor's masters and workers, and each agent's.
        assert len(started) >= 4, started
        groups.update(os.getpgid(pid) for pid in started)
        assert process.pid not in groups  # each in a group of its own, not the command's

        client = ConductorClient(f"http://127.0.0.1:{conductor_port}", "admin")
        hosts = client.get("/hosts")["hosts"]
        assert sorted((h["name"], h["zone"], h["state"]) for h in hosts) == [
            ("host-1", "zone-1", "up"),
            ("host-2", "zone-2", "up"),
        ]
        flavors = {f["name"] for f in client.get("/flavors")["flavors"]}
        assert {"m1.tiny", "m1.small", "m1.medium"} <= flavors
        made = client.request("POST", "/servers", {"server": {"name": "web", "flavorRef": "m1.tiny"}})["server"]
        operation = ended(client, made["operation_id"])
        assert operation["state"] == "done", operation
        server = client.get(f"/servers/{made['id']}")["server"]
        assert server["status"] == "ACTIVE"
        assert server["OS-EXT-SRV-ATTR:host"] in ("host-1", "host-2")

        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=25) == 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        # What is left running is checked below; killed here, whether the test goes on or not.
        leftover = [group for group in groups if group_members(group)]
        for group in leftover:
            os.killpg(group, signal.SIGKILL)
    time.sleep(0.5)  # the reader thread's last lines
    while not lines.empty():
        seen.append(lines.get())
    output = "".join(seen)
    assert "Stopped agent host-1, agent host-2, berth conductor, berth serve." in output, output
    assert [pid for pid, began in started.items() if start_time(pid) == began] == []
    assert leftover == []
    for log in (folder / "logs").iterdir():
        assert "Traceback" not in log.read_text(), log


def test_a_port_already_taken_is_named_with_its_option_and_nothing_starts(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for option, other in (("--placement-port", "--conductor-port"), ("--conductor-port", "--placement-port")):
            said = refused(
                "--folder", str(tmp_path / "cloud"), option, str(port), other, str(free_port()), cwd=tmp_path
            )
            assert said == [
                f"berth cloud: port {port} of 127.0.0.1 is already in use by another process; stop it or "
                f"choose another {option}."
            ]
    assert list(tmp_path.iterdir()) == []


def test_the_readme_shows_the_command_these_tests_run_with_its_defaults():
    # The README's line starts a cloud that runs until Ctrl-C: it is run here, not by the README's test.
    readme = (ROOT / "README.md").read_text()
    assert "\n    .venv/bin/berth cloud\n" in readme
    assert "`./berth-cloud`" in readme


def test_git_ignores_the_cloud_folder_made_in_a_checkout():
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    done = subprocess.run(
        ["git", "-C", str(ROOT), "check-ignore", "-q", "--no-index", "berth-cloud/logs/x"], timeout=30
    )
    assert done.returncode == 0


def test_a_second_cloud_in_the_same_folder_is_refused_and_the_first_runs_on(tmp_path):
    """Two clouds on one folder would share its databases and its agents' state: the second is
    refused before it starts anything. The first's dashboard shows its conductor's control plane."""
    placement_port, conductor_port = free_port(), free_port()
    folder = tmp_path / "cloud"
    ports = ("--placement-port", str(placement_port), "--conductor-port", str(conductor_port))
    process = berth_cloud("--folder", str(folder), "--hosts", "1", *ports, cwd=tmp_path)
    seen: list[str] = []
    lines = lines_of(process)
    try:
        wait_for_line(lines, "Ctrl-C", 150, seen)
        placement_url, conductor_url = f"http://127.0.0.1:{placement_port}", f"http://127.0.0.1:{conductor_port}"

        config = requests.get(f"{placement_url}/dashboard/config.json", timeout=10).json()
        assert config["conductor_url"] == conductor_url
        control = requests.get(
            f"{conductor_url}/berth/dashboard/control",
            headers={"Origin": placement_url, "X-Auth-Token": "admin"},
            timeout=10,
        )
        assert control.status_code == 200, control.text
        assert control.headers["access-control-allow-origin"] == placement_url

        other = ("--placement-port", str(free_port()), "--conductor-port", str(free_port()))
        assert refused("--folder", str(folder), "--hosts", "1", *other, cwd=tmp_path) == [
            f"berth cloud: another berth cloud (pid {process.pid}) runs in the folder {folder}; stop it "
            "(Ctrl-C where it runs) or choose another --folder."
        ]

        assert process.poll() is None
        client = ConductorClient(conductor_url, "admin")
        assert [(h["name"], h["state"]) for h in client.get("/hosts")["hosts"]] == [("host-1", "up")]
        assert requests.get(f"{placement_url}/healthz", timeout=10).ok
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=25) == 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    for log in (folder / "logs").iterdir():
        assert "Traceback" not in log.read_text(), log
        assert "another agent holds" not in log.read_text(), log

    # Stopped, the folder is free again: a cloud starts there (and is refused nothing).
    again = berth_cloud("--folder", str(folder), "--hosts", "1", *ports, cwd=tmp_path)
    try:
        wait_for_line(lines_of(again), "Ctrl-C", 150, [])
        again.send_signal(signal.SIGINT)
        assert again.wait(timeout=25) == 0
    finally:
        if again.poll() is None:
            os.killpg(again.pid, signal.SIGKILL)
            again.wait()


def test_an_agents_path_that_is_not_a_folder_is_said_in_one_line_before_anything_starts(tmp_path):
    folder = tmp_path / "cloud"
    folder.mkdir()
    (folder / "agents").write_text("not a folder")
    placement_port, conductor_port = free_port(), free_port()
    ports = ("--placement-port", str(placement_port), "--conductor-port", str(conductor_port))
    assert refused("--folder", str(folder), "--hosts", "1", *ports, cwd=tmp_path) == [
        f"berth cloud: cannot make the agents' folder {folder / 'agents' / 'host-1'}: {folder / 'agents'} is a "
        "file, not a folder; move it away or choose another --folder."
    ]
    assert sorted(p.name for p in (folder / "logs").iterdir()) == []  # nothing started, nothing logged
