"""The folder the workers of one ``berth serve`` count their metrics in.

prometheus_client picks its multiprocess mode when it is first imported, from
``$PROMETHEUS_MULTIPROC_DIR``: the variable must be set before the application's modules are, in the
master, so that every worker forked from it counts into the folder.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from typing import Final

# Known here without importing the library, which importing would fix in its mode.
MULTIPROCESS_DIR_VARIABLE: Final = "PROMETHEUS_MULTIPROC_DIR"


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
    directory = tempfile.mkdtemp(prefix="berth-metrics-")
    os.environ[MULTIPROCESS_DIR_VARIABLE] = directory
    try:
        yield directory
    finally:
        os.environ.pop(MULTIPROCESS_DIR_VARIABLE, None)
        shutil.rmtree(directory, ignore_errors=True)
