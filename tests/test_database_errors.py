"""A wrong ``--database`` or a database that is down: one line saying what is wrong, exit status 1."""

from __future__ import annotations

import subprocess
import sys

import pytest
from livehelpers import free_port

from berth.cli.main import main

FORMS = "give sqlite:///FILE or postgresql://user:password@host/dbname"


def _postgres_down() -> str:
    return f"postgresql://berth:s3cret@127.0.0.1:{free_port()}/books"


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("garbage://x", f"Berth keeps its books in SQLite or PostgreSQL, not 'garbage': {FORMS}"),
        ("mysql://berth@localhost/books", f"Berth keeps its books in SQLite or PostgreSQL, not 'mysql': {FORMS}"),
        ("not a url", f"cannot read the database URL 'not a url': {FORMS}"),
    ],
)
def test_db_upgrade_refuses_a_url_berth_cannot_use(url, said, capsys):
    assert main(["db", "upgrade", "--database", url]) == 1
    assert _one_line(capsys.readouterr().err) == f"berth: {said}"


def test_a_sqlite_file_in_a_missing_folder_is_named_with_what_to_do(tmp_path, capsys):
    path = tmp_path / "no" / "such" / "books.sqlite"
    assert main(["db", "upgrade", "--database", f"sqlite:///{path}"]) == 1
    line = _one_line(capsys.readouterr().err)
    assert f"no folder {path.parent} for the SQLite file {path}: create the folder" in line
    assert not path.parent.exists()


def test_db_upgrade_and_export_with_postgresql_down(tmp_path, capsys):
    url = _postgres_down()
    port = url.rsplit(":", 1)[1].split("/")[0]
    for command in (["db", "upgrade"], ["export", str(tmp_path / "books.jsonl")]):
        assert main([*command, "--database", url]) == 1
        line = _one_line(capsys.readouterr().err)
        assert line.startswith(f"berth: cannot reach the database postgresql://berth:***@127.0.0.1:{port}/books: ")
        assert "Connection refused" in line and "is PostgreSQL running there" in line
        assert "s3cret" not in line
    assert not (tmp_path / "books.jsonl").exists()


def test_serve_with_postgresql_down_stops_with_one_line():
    done = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "serve", "--bind", f"127.0.0.1:{free_port()}"]
        + ["--database", _postgres_down()],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert _one_line(done.stderr).startswith("berth: cannot reach the database postgresql://berth:***@127.0.0.1:")
