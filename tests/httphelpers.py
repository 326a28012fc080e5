"""A client's HTTP calls, recorded: real calls through ``berth.clients.http``, each one's method and
path (with its query) kept, so that a test can tell what a client sent."""

from __future__ import annotations

from typing import Any

from berth.clients.http import Answer, JsonHttp


class RecordingHttp(JsonHttp):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.sent: list[tuple[str, str]] = []
        # The same calls with their bodies.
        self.bodies: list[tuple[str, str, Any]] = []

    def request(self, method: str, path: str, body: object = None, *, params: Any = None) -> Answer:
        self.sent.append((method, path))
        self.bodies.append((method, path, body))
        return super().request(method, path, body, params=params)
