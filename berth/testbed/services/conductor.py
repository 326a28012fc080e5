"""``berth conductor`` in a subprocess: started on a free loopback port, waited for, stopped or
killed (the whole process group at once, as a machine that died would be)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

import requests

from berth.testbed.errors import TestbedError
from berth.testbed.logs import tail
from berth.testbed.loopback import free_port
from berth.testbed.processes import stop_group

START_TIMEOUT = 60.0


class ConductorProcess:
    def __init__(
        self,
        placement_url: str,
        database_url: str,
        logdir: str,
        *,
        workers: int = 1,
        name: str = "conductor",
        extra: Sequence[str] = (),
    ):
        self.placement_url = placement_url
        self.database_url = database_url
        self.workers = workers
        self.extra = list(extra)
        self.logpath = os.path.join(logdir, f"{name}.log")
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.url = ""

    def start(self, port: int | None = None) -> ConductorProcess:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "berth.cli.main", "conductor", "--bind", f"127.0.0.1:{self.port}"]
        command += ["--placement", self.placement_url, "--database", self.database_url]
        command += ["--workers", str(self.workers), *self.extra]
        with open(self.logpath, "ab") as log:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise TestbedError(f"berth conductor exited:\n{tail(self.logpath)}")
            with contextlib.suppress(requests.RequestException):
                if requests.get(self.url + "/healthz", timeout=2).ok:
                    return self
            time.sleep(0.1)
        self.kill()
        raise TestbedError(f"berth conductor did not answer within {START_TIMEOUT:.0f} s:\n{tail(self.logpath)}")

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """kill -9 of the master and every worker at once."""
        self._signal(signal.SIGKILL, 10.0)

    def stop(self, grace: float = 15.0) -> None:
        self._signal(signal.SIGTERM, grace)

    def _signal(self, sig: int, grace: float) -> None:
        stop_group(self.process, sig, grace)

    def log_text(self) -> str:
        try:
            with open(self.logpath, errors="replace") as f:
                return f.read()
        except OSError:
            return ""
