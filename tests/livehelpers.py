"""Running ``berth serve`` as a real multi-worker server for the tests that need one."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from berth.testbed.client import Client
from berth.testbed.loopback import free_port  # noqa: F401 - the tracker's tests take their ports here
from berth.testbed.services.server import Server


class LiveServer:
    """A started ``berth serve``; ``stop`` returns what it logged."""

    def __init__(self, database_url: str, workers: int = 3, extra: Sequence[str] = ()):
        self.logdir = tempfile.mkdtemp(prefix="berth-live-")
        self.server = Server(database_url, workers, self.logdir, extra)
        try:
            self.server.start()
        except BaseException:
            shutil.rmtree(self.logdir, ignore_errors=True)
            raise
        self.url = self.server.url

    def client(self) -> Client:
        """An admin client at the latest microversion (close it when done)."""
        return Client(self.url, version="latest")

    def stop(self) -> str:
        self.server.stop(grace=15.0)
        text = self.server.log_text()
        shutil.rmtree(self.logdir, ignore_errors=True)
        return text


def live_on(
    request: pytest.FixtureRequest, tmp_path: Path, name: str, workers: int = 4, extra: Sequence[str] = ()
) -> Iterator[LiveServer]:
    """For a fixture parametrized over "sqlite" and "postgresql": a live server on a new database of
    that kind (``name`` prefixes a PostgreSQL database's), stopped after the test, whose log must
    hold no traceback."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'live.sqlite'}"
    else:
        url = request.getfixturevalue("postgres_server").create_database(f"{name}_{uuid.uuid4().hex[:10]}")
    server = LiveServer(url, workers=workers, extra=extra)
    yield server
    log = server.stop()
    assert "Traceback" not in log, log


def live_host(client: Client, name: str, inventory: Mapping[str, int]) -> str:
    """A new root provider with these totals, through the API; its uuid."""
    provider = str(uuid.uuid4())
    assert client.request("POST", "/resource_providers", {"name": name, "uuid": provider}).status_code == 200
    r = client.request(
        "PUT",
        f"/resource_providers/{provider}/inventories",
        {"resource_provider_generation": 0, "inventories": {rc: {"total": n} for rc, n in inventory.items()}},
    )
    assert r.status_code == 200, r.text
    return provider


def run_berth(
    *args: str, cwd: Path | None = None, timeout: float = 60.0, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``berth ARGS`` to its end, in ``cwd``, with no BERTH_ variable but ``env``'s; a process still
    running after ``timeout`` (a server that started) is stopped and reported."""
    environ = {name: value for name, value in os.environ.items() if not name.startswith("BERTH_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "berth.cli.main", *args],
        cwd=cwd,
        env={**environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"berth {' '.join(args)} was still running after {timeout:g} s")
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)
