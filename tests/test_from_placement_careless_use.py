"""``berth import --from-placement`` in a hurried operator's hands: a target that already holds books
of Berth's own (a server group, a quota limit: what a file import refuses too), one a later release
upgraded, one in a folder that does not exist, and a Placement URL where nothing answers. Each is
said before Placement is read (for a big cloud the read takes minutes), and nothing is written.

The source is OpenStack Placement itself, as tests/test_from_placement.py runs it, behind a layer
that notes every request it is sent."""

from __future__ import annotations

import datetime
import io
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from dbhelpers import provider_count
from placementhelpers import served_placement

from berth.cli.main import main
from berth.migration import Books, NotEmpty, Provider, load_into_berth
from berth.portability.format import encode, header
from berth.portability.importer import import_books
from berth.store.database import Database
from berth.store.migrate import upgrade

pytestmark = pytest.mark.slow


class _Placement:
    """OpenStack Placement on a loopback port, and the paths it was asked for since ``asked`` was cleared."""

    def __init__(self, url: str):
        self.url = url
        self.asked: list[str] = []


@pytest.fixture(scope="module")
def placement(tmp_path_factory) -> Iterator[_Placement]:
    """OpenStack Placement on a SQLite file, without authentication (noauth2). Its database engine
    is global to the process (one per test process, whichever module configures it first); these
    tests only read it."""
    noted: list[str] = []

    def noting(app: Any) -> Any:
        def asked(environ: dict[str, Any], start_response: Any) -> Any:
            noted.append(environ.get("PATH_INFO", ""))
            return app(environ, start_response)

        return asked

    with served_placement(tmp_path_factory.mktemp("placement"), noting) as url:
        source = _Placement(url)
        source.asked = noted
        yield source


@pytest.fixture
def source(placement: _Placement) -> _Placement:
    placement.asked.clear()
    return placement


def _snapshot(**records: list[dict[str, Any]]) -> io.StringIO:
    """A snapshot file holding only ``records`` (by kind)."""
    lines = [header(datetime.datetime(2026, 1, 1), {kind: len(listed) for kind, listed in records.items()})]
    lines += [encode(kind, record) for kind, listed in records.items() for record in listed]
    return io.StringIO(b"".join(lines).decode())


def _target(path: Path, **records: list[dict[str, Any]]) -> str:
    """A SQLite database at ``path``, upgraded, holding ``records`` (by kind) and nothing else."""
    url = f"sqlite:///{path}"
    db = Database(url)
    try:
        upgrade(db)
        import_books(db, _snapshot(**records))
    finally:
        db.dispose()
    return url


# Books of Berth's own that a move from Placement never writes: a file import refused a target
# holding them, a move from Placement took it and mixed its books in.
_BERTH_OWN_BOOKS = {
    "server group": ({"server_group": [{"uuid": str(uuid.uuid4()), "policy": "anti-affinity"}]}, "1 server groups"),
    "quota limit": (
        {"quota": [{"project": "project-a", "user": None, "resource": "VCPU", "limit": 20}]},
        "1 projects, 1 quota limits",
    ),
}


@pytest.mark.parametrize("books", sorted(_BERTH_OWN_BOOKS))
def test_a_target_with_books_of_berths_own_is_refused_before_placement_is_read(books, source, tmp_path, capsys):
    records, named = _BERTH_OWN_BOOKS[books]
    url = _target(tmp_path / "berth.sqlite", **records)

    assert main(["import", "--from-placement", source.url, "--database", url]) == 1

    said = capsys.readouterr().err.strip()
    assert said == f"Error: the target database is not empty ({named}); give an empty one. Nothing was written.", said
    assert source.asked == []
    assert provider_count(url) == 0


@pytest.mark.parametrize("books", sorted(_BERTH_OWN_BOOKS))
def test_a_move_refuses_what_a_file_import_refuses(books, tmp_path):
    # The library's move, given books read earlier, keeps to the same rule in its own transaction.
    records, named = _BERTH_OWN_BOOKS[books]
    url = _target(tmp_path / "berth.sqlite", **records)
    provider = str(uuid.uuid4())
    read = Books(source="placement", microversion="1.39")
    read.providers[provider] = Provider(uuid=provider, name="cn1", generation=3, parent_uuid=None, root_uuid=provider)

    with pytest.raises(NotEmpty, match=rf"not empty \({named}\)"):
        load_into_berth(read, url)
    assert provider_count(url) == 0


def test_a_target_of_a_newer_schema_is_refused_before_placement_is_read(source, tmp_path, capsys):
    url = _target(tmp_path / "berth.sqlite")
    db = Database(url)
    try:
        with db.engine.begin() as conn:
            conn.execute(sa.text("UPDATE alembic_version SET version_num = 'f00dfeedbeef'"))
    finally:
        db.dispose()

    assert main(["import", "--from-placement", source.url, "--database", url]) == 1

    said = capsys.readouterr().err.strip()
    assert said.startswith("berth: the database at ") and "is at schema revision f00dfeedbeef, newer" in said, said
    assert source.asked == []


def test_a_target_in_a_folder_that_does_not_exist_is_refused_before_placement_is_read(source, tmp_path, capsys):
    missing = tmp_path / "not-made-yet"

    assert main(["import", "--from-placement", source.url, "--database", f"sqlite:///{missing}/berth.sqlite"]) == 1

    said = capsys.readouterr().err.strip()
    assert said == (
        f"berth: no folder {missing} for the SQLite file {missing}/berth.sqlite: create the folder, "
        "or give another database URL"
    ), said
    assert source.asked == []
    assert not missing.exists()


def test_a_new_target_is_checked_without_being_made_and_the_move_goes_on(source, tmp_path, capsys):
    # The check before the read leaves a database that does not exist yet to the move, which makes it.
    database = tmp_path / "berth.sqlite"

    assert main(["import", "--from-placement", source.url, "--database", f"sqlite:///{database}"]) == 0

    assert f"from {source.url}" in capsys.readouterr().err
    assert "/resource_providers" in source.asked
    assert database.exists()


def test_a_placement_url_where_nothing_answers_is_said_as_placement_not_berth(tmp_path, capsys):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens there once closed
    database = tmp_path / "berth.sqlite"

    assert main(["import", "--from-placement", f"http://127.0.0.1:{port}", "--database", f"sqlite:///{database}"]) == 1

    said = capsys.readouterr().err.strip().splitlines()
    assert said[0] == f"Error: cannot reach Placement at http://127.0.0.1:{port}: connection refused"
    hint = said[1]
    assert "berth serve" not in hint  # Berth's own service is no Placement to move from
    assert hint.startswith("hint: check the URL given as --from-placement ")
    assert "that Placement runs there" in hint and "(--token)" in hint
    assert said[2:] == ["Nothing was written."]
    assert not database.exists()
