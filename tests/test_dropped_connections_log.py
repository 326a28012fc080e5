"""A connection PostgreSQL closed (a restart, a failover) that the pool drops as it takes it back is
one warning line in the services' logs, not an ERROR with a traceback; other errors keep theirs."""

from __future__ import annotations

import io
import logging
import logging.config

import psycopg
import pytest

from berth.web.observability.request_log import logging_config


@pytest.fixture
def written(monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    logging.config.dictConfig(logging_config("text"))
    yield stream
    logging.config.dictConfig({"version": 1, "disable_existing_loggers": False})


def _reset_failed(error: BaseException) -> None:
    try:
        raise error
    except BaseException:
        logging.getLogger("sqlalchemy.pool.impl.QueuePool").error("Exception during reset or similar", exc_info=True)


def test_a_connection_the_database_closed_is_one_warning(written):
    _reset_failed(psycopg.errors.AdminShutdown("terminating connection due to administrator command"))
    text = written.getvalue()
    assert "WARNING" in text and "ERROR" not in text and "Traceback" not in text, text
    assert "dropped as it went back to the pool (terminating connection due to administrator command)" in text


def test_any_other_reset_failure_keeps_its_traceback(written):
    _reset_failed(ValueError("something else"))
    text = written.getvalue()
    assert "ERROR" in text and "Traceback" in text and "ValueError: something else" in text, text
