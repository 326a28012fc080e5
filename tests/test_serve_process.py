"""``berth serve`` as a real process: what it does when it cannot have the address it was given."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

import pytest

from tests.livehelpers import LiveServer

pytestmark = pytest.mark.slow


def _run_serve(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``berth serve ARGS`` to its end; a server still running after ``timeout`` is stopped and reported."""
    process = subprocess.Popen(
        [sys.executable, "-m", "berth.cli.main", "serve", *args],
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
        pytest.fail(f"berth serve {' '.join(args)} was still running after {timeout:g} s")
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def test_a_second_server_on_a_taken_port_refuses_to_start(tmp_path):
    first = LiveServer(f"sqlite:///{tmp_path / 'first.sqlite'}", workers=1)
    try:
        done = _run_serve(
            "--bind", f"127.0.0.1:{first.server.port}", "--database", f"sqlite:///{tmp_path / 'second.sqlite'}"
        )
        assert done.returncode != 0
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert f"127.0.0.1:{first.server.port}" in lines[0]
        assert "already in use" in lines[0]
        # Refused before it touched its database.
        assert not (tmp_path / "second.sqlite").exists()
        assert first.server.running()
    finally:
        first.stop()
