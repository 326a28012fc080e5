"""A move from Placement refused without a trace of it in the target: an endpoint that answers, but
not as Placement does, and a second move into the same database while the first one runs."""

from __future__ import annotations

import http.server
import json
import threading
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from berth.cli.main import cli
from berth.migration import Books, Provider, load_into_berth
from berth.migration.errors import NotEmpty
from berth.store.database import Database
from berth.store.migrate import upgrade

# Placement's GET /, then what a proxy or another service may answer to the reads after it.
_VERSIONS = {"versions": [{"id": "v1.0", "max_version": "1.39", "min_version": "1.0", "status": "CURRENT"}]}


class _Answers(http.server.BaseHTTPRequestHandler):
    answers: dict[str, tuple[str, bytes]] = {}

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = self.path.split("?")[0]
        content_type, body = self.answers.get(path, self.answers["*"])
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _serve(answers: dict[str, tuple[str, bytes]]) -> Iterator[str]:
    handler = type("Handler", (_Answers,), {"answers": answers})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


_HTML = ("text/html", b"<html><body>Welcome to the dashboard</body></html>")


@pytest.fixture
def web_page() -> Iterator[str]:
    """A web page, not an API: a dashboard's or a load balancer's address given by mistake."""
    yield from _serve({"*": _HTML})


@pytest.fixture
def another_api() -> Iterator[str]:
    """An API that answers JSON, but not Placement's (Keystone's /v3 answers so)."""
    yield from _serve({"*": ("application/json", json.dumps({"version": {"id": "v3.14"}}).encode())})


@pytest.fixture
def fails_midway() -> Iterator[str]:
    """Placement's versions, then a page in place of the reads after it (a proxy's maintenance page)."""
    yield from _serve({"/": ("application/json", json.dumps(_VERSIONS).encode()), "*": _HTML})


@pytest.mark.parametrize("endpoint", ["web_page", "another_api", "fails_midway"])
def test_an_endpoint_that_does_not_answer_as_placement_is_said_and_nothing_written(endpoint, request, tmp_path):
    url = request.getfixturevalue(endpoint)
    database = tmp_path / "berth.sqlite"
    runner = CliRunner()

    done = runner.invoke(cli, ["import", "--from-placement", url, "--database", f"sqlite:///{database}"])

    assert isinstance(done.exception, SystemExit), done.exception  # said, not a traceback
    assert done.exit_code == 1
    assert f"Error: {url} does not answer as Placement does: " in done.output
    assert "give Placement's endpoint itself" in done.output
    assert done.output.rstrip().endswith("Nothing was written.")
    assert not database.exists()

    # compare says it as "could not be compared" (2), not as a difference (1).
    done = runner.invoke(cli, ["compare", url, url])
    assert isinstance(done.exception, SystemExit), done.exception
    assert done.exit_code == 2
    assert f"{url} does not answer as Placement does" in done.output


def _books(name: str) -> Books:
    provider = str(uuid.uuid4())
    books = Books(source="test", microversion="1.39")
    books.providers[provider] = Provider(uuid=provider, name=name, generation=4, parent_uuid=None, root_uuid=provider)
    return books


def test_a_move_into_a_postgresql_database_being_written_waits_and_is_refused(postgres_server):
    # Another writer (a second move, a server started too early) has written a provider and not yet
    # committed when the move looks at the target: the move must not find it empty and mix its books in.
    url = postgres_server.create_database(f"move_{uuid.uuid4().hex[:8]}")
    db = Database(url)
    try:
        upgrade(db)
        other = db.engine.connect()
        writing = other.begin()
        other.exec_driver_sql(
            "INSERT INTO resource_providers (uuid, name, generation, created_at, updated_at) "
            f"VALUES ('{uuid.uuid4()}', 'written-meanwhile', 0, now(), now())"
        )
        outcome: list[object] = []

        def move() -> None:
            try:
                outcome.append(load_into_berth(_books("from-placement"), url))
            except Exception as error:  # noqa: BLE001 - the outcome is what the test looks at
                outcome.append(error)

        mover = threading.Thread(target=move)
        mover.start()
        mover.join(timeout=3)  # it waits for the other writer
        writing.commit()
        other.close()
        mover.join(timeout=60)
        assert not mover.is_alive()

        assert len(outcome) == 1 and isinstance(outcome[0], NotEmpty), outcome
        assert "the target database is not empty (1 providers)" in str(outcome[0])
        with db.engine.connect() as conn:
            names = conn.execute(sa.text("SELECT name FROM resource_providers")).scalars().all()
        assert names == ["written-meanwhile"]
    finally:
        db.dispose()
