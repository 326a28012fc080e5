"""``berth serve`` in a subprocess: started on a free loopback port, waited for, stopped."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

from berth.testbed import processes
from berth.testbed.client import Client
from berth.testbed.errors import TestbedError
from berth.testbed.loopback import free_port

START_TIMEOUT = 90.0
STOP_GRACE = 20.0


class Server:
    """``berth serve`` in a process group of its own, logging to a file in ``logdir``.

    ``start`` may be called again after ``kill_group``: the same command on the same port and
    database, appending to the same log.
    """

    def __init__(self, database_url: str, workers: int, logdir: str, extra: Sequence[str] = ()):
        self.database_url = database_url
        self.workers = workers
        # Further options of berth serve (--dashboard-conductor URL, ...).
        self.extra = list(extra)
        self.logpath = os.path.join(logdir, f"server-{time.time_ns()}.log")
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.url = ""

    def start(self, port: int | None = None) -> None:
        """Start on ``port`` (default: a free one, with two more tries if another process took it)."""
        for _ in range(3 if port is None else 1):
            self.port = port or free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            self.process = self._spawn()
            if self.wait_answering(START_TIMEOUT):
                return
            self.stop(grace=1.0)
            if "Address already in use" not in self.log_tail():
                break
        raise TestbedError(f"berth serve did not start:\n{self.log_tail()}")

    def _spawn(self) -> subprocess.Popen[bytes]:
        command = [sys.executable, "-m", "berth.cli.main", "serve", "--bind", f"127.0.0.1:{self.port}"]
        command += ["--database", self.database_url, "--workers", str(self.workers), *self.extra]
        with open(self.logpath, "ab") as logfile:
            return subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=logfile, stderr=subprocess.STDOUT, start_new_session=True
            )

    def wait_answering(self, timeout: float) -> bool:
        """Whether the server answers within ``timeout`` seconds (False at once if it exited)."""
        client = Client(self.url, timeout=5.0)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if self.process is None or self.process.poll() is not None:
                    return False
                if client.answers():
                    return True
                time.sleep(0.1)
        finally:
            client.close()
        return False

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def worker_pids(self) -> list[int]:
        return processes.children_of(self.process.pid) if self.process else []

    def memory(self) -> dict[str, float | int] | None:
        """Resident memory of the master and its workers (:func:`processes.tree_memory`), if running."""
        if self.process is None or not self.running():
            return None
        return processes.tree_memory(self.process.pid)

    def kill_group(self) -> None:
        """kill -9 of the master and every worker at once."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def log_text(self) -> str:
        try:
            with open(self.logpath, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "".join(self.log_text().splitlines(keepends=True)[-lines:]) or "(no server log)"

    def stop(self, grace: float = STOP_GRACE) -> None:
        """SIGTERM to the process group, SIGKILL after ``grace`` seconds.

        The workers log "Worker exiting" at once but may then take seconds of CPU to wind down; a
        caller that has read everything it needs can cut that short with a small ``grace``.
        """
        process = self.process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)
        with contextlib.suppress(ProcessLookupError):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
        process.wait()
