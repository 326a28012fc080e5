"""The CPU the processes of a run used: user and system time of every process of some process
trees (``berth serve`` and its workers, each ``berth conductor`` and its worker, the host pools and
agents), read from /proc.

A process killed by a fault takes its time with it: the meter keeps the last time it read of every
process it has seen, and is read often (``sample``, from a thread, and just before a kill), so that
the total counts the dead ones up to their last reading.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from typing import Final

SAMPLE_INTERVAL: Final = 1.0


def _stat(pid: int) -> tuple[int, float] | None:
    """The process's parent and its user + system seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except (OSError, IndexError):
        return None
    # After the name: state ppid ... utime (14th field of the line, 12th here) stime.
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _every_process() -> dict[int, tuple[int, float]]:
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None:
                found[int(entry)] = stat
    return found


class CpuMeter:
    """Seconds of CPU by group (``service``, ``conductors``), over the trees of the roots each group's
    function names at the time of the reading (a process started again has a new root)."""

    def __init__(self, roots: dict[str, Callable[[], Iterable[int]]]):
        self.roots = roots
        # (group, pid) -> the last seconds read; pids are not reused within a run's minutes.
        self._seen: dict[tuple[str, int], float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        processes = _every_process()
        children: dict[int, list[int]] = {}
        for pid, (parent, _) in processes.items():
            children.setdefault(parent, []).append(pid)
        with self._lock:
            for group, roots in self.roots.items():
                stack = [pid for pid in roots() if pid in processes]
                while stack:
                    pid = stack.pop()
                    self._seen[(group, pid)] = max(self._seen.get((group, pid), 0.0), processes[pid][1])
                    stack.extend(children.get(pid, ()))

    def totals(self) -> dict[str, float]:
        self.sample()
        with self._lock:
            totals = dict.fromkeys(self.roots, 0.0)
            for (group, _), seconds in self._seen.items():
                totals[group] += seconds
            return totals

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sim-cpu-meter", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_INTERVAL):
            self.sample()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
