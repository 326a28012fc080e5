"""The processes ``berth cloud`` starts: each ``berth ...`` command in a process group of its own,
logging to a file, waited for until it answers, and stopped with all its workers."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import requests

from berth.testbed.logs import tail


class StartFailed(Exception):
    """A process exited or did not answer in time; the message says which and ends with its log."""


def port_taken(port: int, host: str = "127.0.0.1") -> bool:
    """Whether another process listens on ``host:port`` (or the port cannot be bound at all)."""
    with socket.socket() as probe:
        # As the services bind: a port left in TIME_WAIT by a process that has gone is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as e:
            return e.errno in (errno.EADDRINUSE, errno.EACCES)
    return False


def child_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of the started commands: the caller's without its ``BERTH_*`` settings, which
    would change what the cloud is (another database, another authentication) behind its back."""
    return {name: value for name, value in environ.items() if not name.startswith("BERTH_")}


@dataclass
class Child:
    """One ``berth`` command: ``name`` for the messages, its arguments, its log file."""

    name: str
    arguments: Sequence[str]
    logpath: Path
    port_option: str = ""  # the option of ``berth cloud`` that chooses its port, if one does
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self, environment: Mapping[str, str]) -> None:
        command = [sys.executable, "-m", "berth.cli.main", *self.arguments]
        with open(self.logpath, "ab") as log:
            # A session of its own: the terminal's Ctrl-C reaches ``berth cloud`` alone, which then
            # stops the processes in order; and a process's workers are stopped with it as one group.
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(environment),
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.process.pid if self.process else 0

    def exit_status(self) -> int | None:
        """None while it runs."""
        return None if self.process is None else self.process.poll()

    def wait_until(self, answers: Callable[[], bool], timeout: float, check_stop: Callable[[], None]) -> None:
        """Until ``answers()``; StartFailed if the process exits or ``timeout`` seconds pass first.
        ``check_stop`` is called at every look, and raises to give up waiting."""
        deadline = time.monotonic() + timeout
        while True:
            check_stop()
            status = self.exit_status()
            if status is not None:
                raise StartFailed(self.exit_message(status))
            with contextlib.suppress(requests.RequestException):
                if answers():
                    return
            if time.monotonic() > deadline:
                raise StartFailed(
                    f"{self.name} did not answer within {timeout:.0f} s; the end of {self.logpath}:\n{self.tail()}"
                )
            time.sleep(0.1)

    def exit_message(self, status: int) -> str:
        if self.port_option and "Address already in use" in self.tail():
            # Taken between the check before the start and the start itself.
            return f"{self.name} could not listen: its port is already in use; choose another {self.port_option}."
        return f"{self.name} exited with status {status}; the end of {self.logpath}:\n{self.tail()}"

    def tail(self) -> str:
        return tail(str(self.logpath), 15)

    def terminate(self) -> None:
        if self.exit_status() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGTERM)


def answers_at(url: str) -> Callable[[], bool]:
    return lambda: requests.get(url, timeout=2).ok


def stop_all(children: Iterable[Child], grace: float = 15.0) -> None:
    """SIGTERM to every process group, in the order given, then SIGKILL to whatever of a group is
    left after ``grace`` seconds (workers included, once their leader has gone)."""
    started = [child for child in children if child.process is not None]
    for child in started:
        child.terminate()
    deadline = time.monotonic() + grace
    for child in started:
        assert child.process is not None
        try:
            child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.process.wait()
    for child in started:
        # A group that still has members still owns its id, which is therefore the one started here.
        until = time.monotonic() + 5.0
        while group_members(child.pid) and time.monotonic() < until:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            time.sleep(0.05)


def group_members(group: int) -> list[int]:
    """The live processes of process group ``group``, from /proc/N/stat (the group is the third
    field after the command's closing parenthesis)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == group and fields[0] not in ("Z", "X"):
            members.append(int(entry))
    return members
