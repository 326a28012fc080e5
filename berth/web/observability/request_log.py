"""One line per request on the ``berth.request`` logger, as key=value text or as JSON.

The record carries the fields themselves (``record.request``), so the JSON formatter writes them as
they are and a test reads them without parsing; the text is made only when a handler emits it.
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import asdict, dataclass
from typing import Any, Final

import orjson

REQUEST_LOGGER: Final = logging.getLogger("berth.request")
LOG_FORMATS: Final = ("text", "json")
TEXT_FORMAT: Final = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"


@dataclass(frozen=True, slots=True)
class RequestLine:
    request_id: str
    global_request_id: str | None
    route: str
    method: str
    status: int
    latency_ms: float
    project: str | None
    error_code: str | None
    # Which HTTP service answered, where one process's log may hold several's lines.
    service: str | None = None

    def __str__(self) -> str:
        parts = [f"service={self.service}"] if self.service else []
        parts.append(f"request_id={self.request_id}")
        if self.global_request_id:
            parts.append(f"global_request_id={self.global_request_id}")
        parts += [
            f"route={self.route}",
            f"method={self.method}",
            f"status={self.status}",
            f"latency_ms={self.latency_ms:.2f}",
            f"project={_quoted(self.project) if self.project is not None else '-'}",
        ]
        if self.error_code:
            parts.append(f"error_code={self.error_code}")
        return " ".join(parts)


def _quoted(value: str) -> str:
    """A caller's project as one token of the line (it comes from a header)."""
    if value and not any(c.isspace() or c in '"=' for c in value):
        return value
    return orjson.dumps(value).decode()


def log_request(line: RequestLine) -> None:
    if REQUEST_LOGGER.isEnabledFor(logging.INFO):
        REQUEST_LOGGER.info(line, extra={"request": line})


class JsonFormatter(logging.Formatter):
    """A record as one JSON object: time (UTC, ISO 8601), level, logger, then the request's fields
    for ``berth.request`` and the message for any other logger."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "process": record.process,
        }
        line = getattr(record, "request", None)
        if isinstance(line, RequestLine):
            document.update((k, v) for k, v in asdict(line).items() if v is not None)
        else:
            document["message"] = record.getMessage()
            if record.exc_info:
                document["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(document).decode()


def logging_config(log_format: str) -> dict[str, Any]:
    """A ``logging.config.dictConfig`` for the server and each of its workers: every logger (the
    server's own too) writes to standard error in ``log_format``."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"unknown log format {log_format!r}")
    formatter: dict[str, Any] = {"()": f"{__name__}.JsonFormatter"} if log_format == "json" else {"format": TEXT_FORMAT}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"berth": formatter},
        "filters": {
            "dropped_connections": {"()": "berth.web.observability.dropped_connections.DroppedConnectionFilter"}
        },
        "handlers": {
            "berth": {
                "class": "logging.StreamHandler",
                "formatter": "berth",
                "stream": "ext://sys.stderr",
                "filters": ["dropped_connections"],
            }
        },
        "root": {"handlers": ["berth"], "level": "INFO"},
        # The server's own loggers, written through the root's handler.
        "loggers": {"_granian": {"level": "INFO"}, "granian.access": {"level": "INFO"}},
    }
