"""Running ``berth serve`` as a real multi-worker server for the tests that need one."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import requests

ADMIN = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement latest"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    def __init__(self, database_url: str, workers: int = 3):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "berth.cli.main",
                "serve",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--database",
                database_url,
                "--workers",
                str(workers),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("berth serve exited:\n" + self.process.stdout.read().decode())
            try:
                requests.get(self.url + "/", timeout=5)
                return
            except requests.RequestException:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("berth serve did not answer within 60 s")

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        return self.process.stdout.read().decode()
