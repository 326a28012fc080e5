"""``ConductorClient``: the conductors' API (``berth conductor``) over HTTP, for the operator's
commands and the agents' registration. Any conductor answers any request; the client may be given
several URLs and moves to the next when one does not answer."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Final

from berth.clients.errors import ClientError
from berth.clients.http import Answer, JsonHttp, ReadTimedOut, TransportError

DEFAULT_URL = "http://127.0.0.1:8774"
# The conductors refuse a host's registration because another agent, whose heartbeats are fresh,
# holds the host's name (409). Kept here, not with the conductors' other codes
# (berth.conductor.errors), because an agent acts on it and imports the client, not the conductor.
HOST_NAME_TAKEN: Final = "berth.host.name_taken"


class ConductorError(ClientError):
    """The conductors answered an error (``status`` 0: none answered at all; ``sent``: the request
    reached one, which did not answer in time, and may have acted on it)."""

    def __init__(
        self, status: int, code: str | None, detail: str, method: str = "", path: str = "", *, sent: bool = False
    ):
        super().__init__(f"{method} {path}: {status} {code or ''} {detail}".strip())
        self.status = status
        self.code = code
        self.detail = detail
        self.sent = sent


class ConductorClient:
    def __init__(
        self,
        urls: str | Sequence[str] = DEFAULT_URL,
        token: str = "admin",
        *,
        roles: Collection[str] = (),
        timeout: float = 30.0,
    ):
        self.urls = [u.rstrip("/") for u in ([urls] if isinstance(urls, str) else urls)]
        if not self.urls:
            raise ValueError("at least one conductor URL")
        self.headers = {"X-Auth-Token": token, "Accept": "application/json"}
        if roles:
            self.headers["X-Roles"] = ",".join(roles)
        self._http = {url: JsonHttp(url, self.headers, timeout=timeout) for url in self.urls}

    @property
    def url(self) -> str:
        return self.urls[0]

    def request(self, method: str, path: str, body: object = None) -> Any:
        """The answer's JSON (None for an empty one); ConductorError for an error answer or none."""
        unreachable: list[str] = []
        for index, url in enumerate(list(self.urls)):
            try:
                response = self._http[url].request(method, path, body)
            except ReadTimedOut as e:
                # Sent, perhaps acted on: asking another conductor could do it twice.
                raise ConductorError(0, None, f"no answer in time: {e}", method, path, sent=True) from None
            except TransportError as e:
                unreachable.append(f"{url}: {e}")
                continue
            if index:  # this one answers: ask it first from now on
                self.urls.insert(0, self.urls.pop(index))
            if response.status >= 400:
                raise _error(response, method, path)
            if not response.content:
                return None
            return response.json()
        raise ConductorError(0, None, "no conductor answered: " + "; ".join(unreachable), method, path)

    def get(self, path: str) -> Any:
        return self.request("GET", path)


def _error(response: Answer, method: str, path: str) -> ConductorError:
    try:
        first = response.json()["errors"][0]
        code, detail = first.get("code"), str(first.get("detail") or first.get("title"))
    except (ValueError, KeyError, IndexError, TypeError):
        code, detail = None, response.text.strip()[:500]
    return ConductorError(response.status, code, detail, method, path)
