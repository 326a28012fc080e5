"""A backup replaced by ``berth export`` keeps its mode, an empty FILE given to ``berth import`` is
refused before a database is made for it, and Berth's own routes that take a JSON body check its media
type before the policy, as Placement's routes do."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator

import pytest
from apihelpers import error_detail

from berth.cli.main import main
from berth.store.database import Database
from berth.store.migrate import upgrade

# --- berth export over last night's backup -----------------------------------------------------------


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    """A umask that would make a new file readable by everyone, as on many hosts."""
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


@pytest.mark.parametrize("mode", [0o600, 0o640])
def test_an_export_over_a_backup_keeps_its_mode(tmp_path, capsys, permissive_umask, mode):
    url = f"sqlite:///{tmp_path / 'berth.sqlite'}"
    db = Database(url)
    try:
        upgrade(db)
    finally:
        db.dispose()
    backup = tmp_path / "books.jsonl"
    assert main(["export", str(backup), "--database", url]) == 0
    # The operator keeps the backups from other users' eyes.
    backup.chmod(mode)

    assert main(["export", str(backup), "--database", url]) == 0

    assert stat.S_IMODE(backup.stat().st_mode) == mode
    assert backup.read_text().startswith('{"format":"berth-books"')
    # A new FILE is made as before, as the umask says.
    fresh = tmp_path / "fresh.jsonl"
    assert main(["export", str(fresh), "--database", url]) == 0
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644


# --- berth import of an empty file --------------------------------------------------------------------


def test_an_empty_file_is_refused_before_a_database_is_made_for_it(tmp_path, capsys):
    (tmp_path / "empty.jsonl").write_text("")
    url = f"sqlite:///{tmp_path / 'restored.sqlite'}"

    assert main(["import", str(tmp_path / "empty.jsonl"), "--database", url]) == 1

    said = capsys.readouterr().err
    assert "line 1: the file is empty" in said and said.rstrip().endswith("Nothing was written."), said
    # Nothing made for it: neither the database nor its writer lock.
    assert not any(path.name.startswith("restored") for path in tmp_path.iterdir())


# --- the media type of a body to Berth's own routes ---------------------------------------------------

BERTHS_OWN_BODIES = [
    ("PUT", "/berth/leases/8d0b8f4e-7d34-4f7e-9a55-2b4cf0f7c9a1"),
    ("POST", "/berth/pick"),
    ("PUT", "/berth/quotas/project-a"),
    ("PUT", "/berth/quotas/project-a/users/user-a"),
]


@pytest.mark.parametrize(("method", "path"), BERTHS_OWN_BODIES)
def test_berths_own_routes_check_the_media_type_of_a_body_before_the_policy(api, method, path):
    r = api.request(method, path, raw=b"x", content_type="text/plain", token="user:project")
    assert r.status_code == 415, r.data
    assert error_detail(r).endswith("The media type text/plain is not supported, use application/json")
    # With JSON, the policy speaks: the caller has no role for it.
    r = api.request(method, path, raw=b"{}", token="user:project")
    assert r.status_code == 403, r.data
