"""A process and its descendants, read from /proc: who they are and the memory they hold."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def children_of(pid: int) -> list[int]:
    """Live (not zombie) children of ``pid``, from /proc/N/stat: after the last ')' come the state
    and the ppid (the command name before it may contain spaces and parentheses)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == pid and state not in ("Z", "X"):
            found.append(int(entry))
    return sorted(found)


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its live descendants, ``pid`` first."""
    pids = [pid]
    todo = children_of(pid)
    while todo:
        child = todo.pop()
        pids.append(child)
        todo.extend(children_of(child))
    return pids


def _status_kb(pid: int, path: str, field: str) -> int | None:
    try:
        with open(path.format(pid)) as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def tree_memory(master: int) -> dict[str, float | int]:
    """Resident memory of ``master`` and its descendants.

    ``pss_total_mb`` is the tree's real footprint: each shared page (the modules the master imported
    before forking, shared libraries) counted once, split between its sharers.  ``rss_total_mb`` sums
    every process's resident set and so counts shared pages once per process.
    """
    pids = process_tree(master)
    rss = {pid: _status_kb(pid, "/proc/{}/status", "VmRSS:") for pid in pids}
    pss = {pid: _status_kb(pid, "/proc/{}/smaps_rollup", "Pss:") for pid in pids}
    rss_kb = {pid: kb for pid, kb in rss.items() if kb is not None}
    pss_kb = {pid: kb for pid, kb in pss.items() if kb is not None}
    workers = [kb for pid, kb in rss_kb.items() if pid != master]
    return {
        "master_pid": master,
        "processes": len(rss_kb),
        "pss_total_mb": round(sum(pss_kb.values()) / 1024, 1),
        "rss_total_mb": round(sum(rss_kb.values()) / 1024, 1),
        "rss_master_mb": round(rss_kb.get(master, 0) / 1024, 1),
        "rss_max_worker_mb": round(max(workers, default=0) / 1024, 1),
    }


def stop_group(process: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM, grace: float = 10.0) -> None:
    """``sig`` to the process's whole group (it was started in a session of its own), then SIGKILL to
    the group if it has not exited within ``grace`` seconds."""
    if process is None or process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
