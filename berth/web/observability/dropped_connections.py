"""SQLAlchemy's pool says "Exception during reset or similar" at ERROR, with a traceback, when a
connection it takes back cannot be rolled back: the database closed it (PostgreSQL restarted or
failed over, or killed it). The pool then drops the connection and the next checkout opens another,
so nothing failed: that record is written as one warning line, for the operator who watches a
failover not to take it for an error. Any other reset failure is left as it is.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Final

_POOL_LOGGERS: Final = "sqlalchemy.pool"
_RESET_FAILED: Final = "Exception during reset"


def _closed_by_the_database(error: BaseException | None) -> bool:
    if isinstance(error, sqlite3.OperationalError):
        return False  # SQLite's are about the file, not a closed connection
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is a dependency
        return False
    return isinstance(error, psycopg.OperationalError)


class DroppedConnectionFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if (
            record.name.startswith(_POOL_LOGGERS)
            and isinstance(record.msg, str)
            and record.msg.startswith(_RESET_FAILED)
            and record.exc_info
            and _closed_by_the_database(record.exc_info[1])
        ):
            error = record.exc_info[1]
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg = "a connection the database closed was dropped as it went back to the pool (%s)"
            record.args = (str(error).strip(),)
            record.exc_info = record.exc_text = None
        return True
