"""The folder the workers of one ``berth serve`` count their metrics in.

prometheus_client picks its multiprocess mode when it is first imported, from
``$PROMETHEUS_MULTIPROC_DIR``: the variable must be set before the application's modules are, in the
master, so that every worker forked from it counts into the folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from typing import Final

# Known here without importing the library, which importing would fix in its mode.
MULTIPROCESS_DIR_VARIABLE: Final = "PROMETHEUS_MULTIPROC_DIR"
_PREFIX: Final = "berth-metrics-"
# In a temporary folder whose server holds a lock on it while it runs (written once it does).
_LOCKED: Final = ".locked"


@contextlib.contextmanager
def multiprocess_metrics_dir() -> Iterator[str]:
    """A clean folder for this server's metric files, named in the environment while it runs.

    An operator's ``$PROMETHEUS_MULTIPROC_DIR`` is emptied of the files of an earlier server and
    kept; otherwise a fresh temporary folder is made, and removed when the server stops.
    """
    if "prometheus_client" in sys.modules:
        raise RuntimeError("prometheus_client was imported before its multiprocess folder was chosen")
    given = os.environ.get(MULTIPROCESS_DIR_VARIABLE)
    if given:
        os.makedirs(given, exist_ok=True)
        for path in glob.glob(os.path.join(given, "*.db")):
            os.remove(path)
        yield given
        return
    remove_orphans(tempfile.gettempdir())
    directory = tempfile.mkdtemp(prefix=_PREFIX)
    lock = hold(directory)
    os.environ[MULTIPROCESS_DIR_VARIABLE] = directory
    try:
        yield directory
    finally:
        os.environ.pop(MULTIPROCESS_DIR_VARIABLE, None)
        shutil.rmtree(directory, ignore_errors=True)
        os.close(lock)


def hold(directory: str) -> int:
    """Lock ``directory`` for as long as this process (or a worker forked from it) runs, and mark
    it so: the kernel lets go of the lock when the last of them ends, however it ends."""
    descriptor = os.open(directory, os.O_RDONLY)
    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with open(os.path.join(directory, _LOCKED), "w"):
        pass
    return descriptor


def remove_orphans(parent: str) -> list[str]:
    """Remove the temporary metrics folders in ``parent`` whose servers are gone: one killed (with
    SIGKILL, as the simulator and the tests kill them) cannot remove its own. A folder is its
    server's for as long as its lock is held; those of older builds, never locked, are left alone.
    The folders removed."""
    removed = []
    for marker in glob.glob(os.path.join(parent, f"{_PREFIX}*", _LOCKED)):
        folder = os.path.dirname(marker)
        try:
            descriptor = os.open(folder, os.O_RDONLY)
        except OSError:
            continue  # removed meanwhile, or another user's
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # its server runs
        else:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
        finally:
            os.close(descriptor)
    return removed
