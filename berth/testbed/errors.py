"""The error root of the tools that drive a server: a failure that ends a run with a message instead
of a traceback."""

from __future__ import annotations


class TestbedError(Exception):
    """A failure of the setup or of the server that ends the run (exit status 2)."""

    __test__ = False  # not a test class, whatever pytest's name pattern says


class ApiError(TestbedError):
    """The server answered a request of the setup or of a check with an unexpected status."""

    def __init__(self, method: str, path: str, status: int, body: str):
        self.status = status
        super().__init__(f"{method} {path} -> HTTP {status}: {body[:500]}")
