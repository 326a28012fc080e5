"""The databases the tests run on: a SQLite file, or a database on the PostgreSQL server the test
session starts (the ``postgres_server`` fixture of tests/conftest.py)."""

from __future__ import annotations

import uuid

import pytest

BACKENDS = ["sqlite", "postgresql"]


def make_database(backend: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> str:
    """The URL of a new, empty database of the given kind."""
    if backend == "sqlite":
        path = tmp_path_factory.mktemp("sqlite") / "berth.sqlite"
        return f"sqlite:///{path}"
    server = request.getfixturevalue("postgres_server")
    return str(server.create_database(f"berth_{uuid.uuid4().hex[:12]}"))
