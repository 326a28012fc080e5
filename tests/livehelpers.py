"""Running ``berth serve`` as a real multi-worker server for the tests that need one."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence

from berth.testbed.client import Client
from berth.testbed.loopback import free_port  # noqa: F401 - the tracker's tests take their ports here
from berth.testbed.server import Server


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
