"""``berth export`` and ``berth import`` in a hurried operator's hands: a FILE that names the database
itself, a disk that fills up under an export that replaces last night's backup. What the operator
had before is kept, and what went wrong is said in one line."""

from __future__ import annotations

import gzip
import os
import resource
import subprocess
import sys
from pathlib import Path

from dbhelpers import database_with_hosts, provider_count

from berth.cli.main import main


def test_export_refuses_to_write_over_the_database_it_exports(tmp_path, monkeypatch, capsys):
    # ``berth export berth.sqlite`` in the service's folder: FILE taken for the database to back up.
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BERTH_DATABASE_URL", raising=False)
    url = database_with_hosts(f"sqlite:///{tmp_path / 'berth.sqlite'}", 3)
    before = (tmp_path / "berth.sqlite").read_bytes()

    assert main(["export", "berth.sqlite"]) == 1

    said = capsys.readouterr().err.strip()
    assert said == (
        "Error: berth.sqlite is a SQLite database, not a snapshot: give FILE another name "
        "(the database to export is --database)"
    )
    assert (tmp_path / "berth.sqlite").read_bytes() == before
    assert provider_count(url) == 3
    assert main(["export", "books.jsonl"]) == 0  # the database is whole, and exports


def _berth_with_files_of_at_most(limit: int, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``berth ARGS`` unable to write a file beyond ``limit`` bytes, as on a disk that fills up
    (Python ignores SIGXFSZ, so the write fails with EFBIG)."""

    def limit_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    environ = {name: value for name, value in os.environ.items() if not name.startswith("BERTH_")}
    return subprocess.run(
        [sys.executable, "-m", "berth.cli.main", *args],
        cwd=cwd,
        env=environ,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit_files,
    )


def test_an_export_that_cannot_be_written_whole_keeps_the_backup_there_before(tmp_path):
    url = database_with_hosts(f"sqlite:///{tmp_path / 'berth.sqlite'}", 600)  # a snapshot of about 300 KB
    backup = tmp_path / "books.jsonl"
    assert main(["export", str(backup), "--database", url]) == 0
    last_night = backup.read_bytes()
    assert len(last_night) > 200_000

    # Room for SQLite's shared-memory file (32 KB), not for the snapshot.
    done = _berth_with_files_of_at_most(100_000, "export", "books.jsonl", "--database", url, cwd=tmp_path)

    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "Error: cannot write books.jsonl: File too large; the file there before is as it was"
    )
    assert backup.read_bytes() == last_night
    assert sorted(path.name for path in tmp_path.iterdir() if "books" in path.name) == ["books.jsonl"]

    # A first export that fails leaves no file at all.
    done = _berth_with_files_of_at_most(100_000, "export", "new.jsonl", "--database", url, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == "Error: cannot write new.jsonl: File too large; no file was written"
    assert not any("new.jsonl" in path.name for path in tmp_path.iterdir())


def test_a_file_that_is_no_snapshot_leaves_no_database_made_for_it(tmp_path, capsys):
    source = database_with_hosts(f"sqlite:///{tmp_path / 'berth.sqlite'}", 2)
    books = tmp_path / "books.jsonl"
    assert main(["export", str(books), "--database", source]) == 0
    (tmp_path / "books.jsonl.gz").write_bytes(gzip.compress(books.read_bytes()))
    (tmp_path / "notes.txt").write_text("restore from last night's backup\n")
    capsys.readouterr()
    target = tmp_path / "restored.sqlite"
    url = f"sqlite:///{target}"

    for given, says in [
        ("berth.sqlite", "line 1: the file is a SQLite database, not a snapshot: to copy its books, export them"),
        ("books.jsonl.gz", "line 1: the file is not UTF-8 text from about here"),
        ("notes.txt", "line 1: not JSON"),
    ]:
        assert main(["import", str(tmp_path / given), "--database", url]) == 1, given
        said = capsys.readouterr().err
        assert says in said and said.rstrip().endswith("Nothing was written."), said
        # Nothing made for it: neither the database nor its writer lock.
        assert not any(path.name.startswith("restored") for path in tmp_path.iterdir()), given

    assert main(["import", str(books), "--database", url]) == 0
    assert provider_count(url) == 2
