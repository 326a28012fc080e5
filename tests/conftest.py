"""Fixtures: a real database of each kind (a SQLite file, a PostgreSQL server started here) behind
the real WSGI application, and helpers to talk to it as a client would."""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import settings

sys.path.insert(0, os.path.dirname(__file__))

from apihelpers import Api  # noqa: E402
from dbhelpers import BACKENDS, make_database, reset  # noqa: E402

from berth.api.app import PlacementApp  # noqa: E402
from berth.store.database import Database  # noqa: E402
from berth.store.migrate import upgrade  # noqa: E402

# Property tests check what a function answers, never how fast: Hypothesis's default deadline per
# example (200 ms) would fail them on a busy machine.
settings.register_profile("berth", deadline=None)
settings.load_profile("berth")

# The quick local loop is `pytest -m "not slow"`. Slow are: the PostgreSQL half of every test that runs
# on both databases; tests using a fixture that starts processes (named here); and modules that start
# processes themselves, which say so with `pytestmark = pytest.mark.slow`.
PROCESS_FIXTURES = {"postgres_server", "placement_service", "live", "sqlite_server", "postgresql_server"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_postgres = callspec is not None and "postgresql" in callspec.params.values()
        if on_postgres or PROCESS_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def postgres_server():
    from berth.testbed.services.postgres import start_postgres

    server = start_postgres()
    yield server
    server.stop()


@pytest.fixture(scope="session", params=BACKENDS)
def session_db(request, tmp_path_factory):
    url = make_database(request.param, tmp_path_factory, request)
    db = Database(url)
    upgrade(db)
    yield db
    db.dispose()


@pytest.fixture
def db(session_db):
    reset(session_db)
    return session_db


@pytest.fixture
def app(db):
    return PlacementApp(db)


@pytest.fixture
def api(app):
    return Api(app)
