"""A real HTTP proxy in front of the service that loses one answer on request: the service does the
work, and the connection closes unanswered, as when the service's worker is killed mid-answer."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

# Headers of one hop, not forwarded.
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class AnswerDropper:
    def __init__(self, target: str):
        self.target = target.rstrip("/")
        self.armed: tuple[str, str] | None = None
        self.dropped: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def drop_next(self, method: str, path: str) -> None:
        """The answer to the next request of ``method`` on ``path`` (its path without the query; one
        ending in ``/*``: any path under it) is lost."""
        with self.lock:
            self.armed = (method, path)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _take(self, method: str, path: str) -> bool:
        with self.lock:
            bare = path.split("?")[0]
            if self.armed is None or self.armed[0] != method:
                return False
            armed = self.armed[1]
            if not (bare == armed or (armed.endswith("/*") and bare.startswith(armed[:-1]))):
                return False
            self.armed = None
            self.dropped.append((method, path.split("?")[0]))
            return True

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                answer = requests.request(
                    self.command, proxy.target + self.path, headers=headers, data=body, timeout=30
                )
                if proxy._take(self.command, self.path):
                    self.close_connection = True
                    return
                self.send_response(answer.status_code)
                for key, value in answer.headers.items():
                    if key.lower() not in _HOP:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = do_PUT = do_DELETE = _forward

            def log_message(self, *args: object) -> None:
                pass

        return Handler
