"""``berth import`` and ``berth export`` given what they cannot take: a snapshot compressed or from a
later release, a database a later release upgraded. Each is said in one line with what to do, and
nothing is written."""

from __future__ import annotations

import gzip
import sqlite3
import uuid

from click.testing import CliRunner
from dbhelpers import provider_count

from berth.cli.main import cli, main
from berth.store.database import Database
from berth.store.migrate import upgrade


def _snapshot(path):
    """A snapshot of one provider, as berth export writes it."""
    provider = str(uuid.uuid4())
    path.write_text(
        '{"format":"berth-books","version":2,"counts":{"provider":1}}\n'
        f'{{"kind":"provider","uuid":"{provider}","name":"disk-pool","generation":3,"parent":null,'
        f'"root":"{provider}"}}\n'
    )
    return path


def test_a_compressed_snapshot_is_refused_with_what_to_do(tmp_path):
    plain = _snapshot(tmp_path / "books.jsonl")
    packed = tmp_path / "books.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    url = f"sqlite:///{tmp_path / 'restored.sqlite'}"

    done = CliRunner().invoke(cli, ["import", str(packed), "--database", url])

    assert done.exit_code == 1, done.output
    assert isinstance(done.exception, SystemExit)  # said, not raised
    assert "line 1: the file is not UTF-8 text" in done.output
    assert "decompress a compressed copy first" in done.output and "Nothing was written." in done.output
    assert not (tmp_path / "restored.sqlite").exists()  # refused before a database was made for it

    # The same snapshot uncompressed goes in.
    assert CliRunner().invoke(cli, ["import", str(plain), "--database", url]).exit_code == 0
    assert provider_count(url) == 1


def test_a_snapshot_of_a_later_release_says_to_import_it_with_that_release(tmp_path):
    later = tmp_path / "later.jsonl"
    later.write_text(_snapshot(tmp_path / "books.jsonl").read_text().replace('"version":2', '"version":3', 1))
    url = f"sqlite:///{tmp_path / 'restored.sqlite'}"

    done = CliRunner().invoke(cli, ["import", str(later), "--database", url])

    assert done.exit_code == 1
    assert "version 3 is not one this Berth reads (it reads 1 and 2): a later release of Berth wrote it" in done.output
    assert "import it with that release or a later one. Nothing was written." in done.output
    assert not (tmp_path / "restored.sqlite").exists()  # refused before a database was made for it


def test_a_database_a_later_release_upgraded_is_not_exported_by_this_one(tmp_path, capsys):
    # Its schema may keep books this release knows nothing of: an export would leave them out unsaid.
    path = tmp_path / "berth.sqlite"
    url = f"sqlite:///{path}"
    db = Database(url)
    try:
        upgrade(db)
    finally:
        db.dispose()
    books = _snapshot(tmp_path / "books.jsonl")
    assert CliRunner().invoke(cli, ["import", str(books), "--database", url]).exit_code == 0
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999_later'")
    out = tmp_path / "backup.jsonl"

    status = main(["export", str(out), "--database", url])

    assert status == 1
    said = capsys.readouterr().err
    assert "is at schema revision 9999_later, newer than this release knows" in said
    assert "run the release that wrote it" in said
    assert not out.exists()
