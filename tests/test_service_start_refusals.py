"""What the services and the database commands refuse before they start anything: a policy or tokens
file they cannot use, an address that is not HOST:PORT, a database newer than this release or not a
database at all. Each refusal is one line saying what is wrong, and nothing is started or written.

Every command runs as a real ``berth`` process, as an operator would run it."""

from __future__ import annotations

import contextlib
import datetime
import sqlite3
import subprocess
from pathlib import Path

import pytest
from livehelpers import LiveServer, run_berth

from berth.portability.format import header
from berth.testbed.client import Client
from berth.testbed.loopback import free_port

pytestmark = pytest.mark.slow

# The advice for a schema behind the newest, which fails on one newer than this release.
DB_UPGRADE_ADVICE = "berth db upgrade"

# A snapshot of no books: the import gets past the file to the database (an empty file is refused first).
NO_BOOKS = header(datetime.datetime(2026, 1, 1), {})


def _usage_error(done: subprocess.CompletedProcess[str]) -> str:
    """The one error line of a usage error (Click's usage and hint lines around it), exit status 2."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, done.stderr
    return errors[0]


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The single line a failed command printed, exit status 1."""
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def _service(command: str, tmp_path: Path) -> list[str]:
    """``berth serve`` or ``berth conductor`` on a free port and a database file in ``tmp_path``."""
    return [command, "--bind", f"127.0.0.1:{free_port()}", "--database", f"sqlite:///{tmp_path / 'books.sqlite'}"]


# ---- the policy file -----------------------------------------------------------------------------


def test_a_relative_policy_file_is_read_from_the_current_folder(tmp_path, monkeypatch):
    # By default listing providers needs the admin or service role; the file opens it to anyone.
    (tmp_path / "policy.yaml").write_text('"placement:resource_providers:list": "@"\n')
    monkeypatch.chdir(tmp_path)  # the server's folder, as it is the test's
    live = LiveServer(f"sqlite:///{tmp_path / 'books.sqlite'}", workers=1, extra=["--policy-file", "policy.yaml"])
    nobody = Client(live.url, token="alice", roles=())
    try:
        assert nobody.get("/resource_providers").status_code == 200
        # A rule the file does not name keeps its default.
        assert nobody.get("/usages?project_id=other").status_code == 403
    finally:
        nobody.close()
        log = live.stop()
    assert "Traceback" not in log, log


@pytest.mark.parametrize("command", ["serve", "conductor"])
@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        ("absent.yaml", None, "cannot read the policy file absent.yaml: No such file or directory"),
        ("broken.json", '{"placement:usages:list": ', "the policy file broken.json is not valid YAML or JSON"),
        ("list.yaml", "- role:admin\n", "the policy file list.yaml holds a list, not a mapping of rule names"),
        ("numbers.yaml", "some:rule: 3\n", "the policy file numbers.yaml: the rule 'some:rule' maps to 3"),
    ],
)
def test_a_policy_file_that_cannot_be_used_is_refused_before_start(tmp_path, command, name, text, problem):
    if text is not None:
        (tmp_path / name).write_text(text)
    done = run_berth(*_service(command, tmp_path), "--policy-file", name, cwd=tmp_path)
    assert problem in _usage_error(done)
    assert not (tmp_path / "books.sqlite").exists()


# ---- the tokens file -----------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["serve", "conductor"])
@pytest.mark.parametrize(
    ("tokens", "problem"),
    [
        (None, "--auth-strategy tokens needs --tokens-file FILE"),
        ("absent.yaml", "cannot read the tokens file absent.yaml: No such file or directory"),
        ("list.yaml", "the tokens file list.yaml needs a mapping 'tokens'"),
        ("nouser.yaml", "the tokens file nouser.yaml: token 1 must map to its user_id"),
    ],
)
def test_a_tokens_file_that_cannot_be_used_is_refused_before_start(tmp_path, command, tokens, problem):
    (tmp_path / "list.yaml").write_text("tokens: [1, 2]\n")
    (tmp_path / "nouser.yaml").write_text("tokens:\n  s3cret: {roles: [admin]}\n")
    given = ["--tokens-file", tokens] if tokens else []
    done = run_berth(*_service(command, tmp_path), "--auth-strategy", "tokens", *given, cwd=tmp_path)
    line = _usage_error(done)
    assert problem in line
    assert "s3cret" not in done.stderr  # a token is a secret, even in the wrong place
    assert not (tmp_path / "books.sqlite").exists()


def test_a_good_tokens_file_still_starts_the_server(tmp_path, monkeypatch):
    (tmp_path / "tokens.yaml").write_text("tokens:\n  s3cret: {user_id: ops, project_id: admin, roles: [admin]}\n")
    monkeypatch.chdir(tmp_path)
    live = LiveServer(
        f"sqlite:///{tmp_path / 'books.sqlite'}",
        workers=1,
        extra=["--auth-strategy", "tokens", "--tokens-file", "tokens.yaml"],
    )
    ops, stranger = Client(live.url, token="s3cret"), Client(live.url, token="other")
    try:
        assert ops.get("/resource_providers").status_code == 200
        assert stranger.get("/resource_providers").status_code == 401
    finally:
        ops.close()
        stranger.close()
        live.stop()


# ---- the address to listen on --------------------------------------------------------------------


@pytest.mark.parametrize("command", ["serve", "conductor"])
@pytest.mark.parametrize("bind", ["127.0.0.1:99999", "127.0.0.1:", "localhost", "nonsense"])
def test_a_malformed_bind_is_refused_as_such(tmp_path, command, bind):
    done = run_berth(command, "--bind", bind, "--database", f"sqlite:///{tmp_path / 'books.sqlite'}", cwd=tmp_path)
    line = _usage_error(done)
    assert f"--bind: {bind!r} is not an address to listen on: give HOST:PORT with a port from 1 to 65535" in line
    assert "noauth2" not in done.stderr
    assert not (tmp_path / "books.sqlite").exists()


def test_a_malformed_bind_in_the_environment_is_named_by_its_variable(tmp_path):
    done = run_berth("serve", cwd=tmp_path, env={"BERTH_BIND": "127.0.0.1:99999"})
    assert "$BERTH_BIND: '127.0.0.1:99999' is not an address to listen on" in _usage_error(done)
    assert not (tmp_path / "berth.sqlite").exists()


@pytest.mark.parametrize("bind", ["127.0.0.1:99999", "localhost"])
def test_the_agent_refuses_a_malformed_bind(tmp_path, bind):
    done = run_berth("agent", "--driver", "fake", "--state-dir", str(tmp_path / "state"), "--bind", bind, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"berth agent: --bind: {bind!r} is not an address to listen on: give HOST:PORT with a port from 1 to "
        "65535 (e.g. 127.0.0.1:8778)"
    ]
    assert not (tmp_path / "state").exists()


# ---- a database newer than this release ----------------------------------------------------------


def _set_revision(path: Path, revision: str) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("UPDATE alembic_version SET version_num = ?", (revision,))
        conn.commit()


def test_a_database_newer_than_this_release_is_refused_in_one_line(tmp_path):
    url = f"sqlite:///{tmp_path / 'books.sqlite'}"
    assert run_berth("db", "upgrade", "--database", url, cwd=tmp_path).returncode == 0
    _set_revision(tmp_path / "books.sqlite", "0099")
    (tmp_path / "nobooks.jsonl").write_bytes(NO_BOOKS)
    for args in (
        ["db", "upgrade", "--database", url],
        ["import", "nobooks.jsonl", "--database", url],
        ["serve", "--bind", f"127.0.0.1:{free_port()}", "--database", url],
    ):
        line = _one_line(run_berth(*args, cwd=tmp_path))
        assert line.startswith(f"berth: the database at {url} is at schema revision 0099, newer than this release"), (
            args,
            line,
        )
        assert "run the release that wrote it, or restore a backup taken before the upgrade" in line
        assert DB_UPGRADE_ADVICE not in line


def test_a_conductors_database_newer_than_this_release_is_refused_in_one_line(tmp_path):
    from berth.conductor.journal import Journal
    from berth.conductor.migrate import VERSION_TABLE

    url = f"sqlite:///{tmp_path / 'conductor.sqlite'}"
    Journal(url).close()
    with contextlib.closing(sqlite3.connect(tmp_path / "conductor.sqlite")) as conn:
        conn.execute(f"UPDATE {VERSION_TABLE} SET version_num = '0099'")
        conn.commit()
    line = _one_line(run_berth("conductor", "--bind", f"127.0.0.1:{free_port()}", "--database", url, cwd=tmp_path))
    assert line.startswith(f"berth conductor: the conductors' database at {url} is at schema revision 0099"), line
    assert "run the release that wrote it, or restore a backup taken before the upgrade" in line


def test_readyz_does_not_advise_an_upgrade_that_would_fail(tmp_path):
    live = LiveServer(f"sqlite:///{tmp_path / 'books.sqlite'}", workers=1)
    probe = Client(live.url, token="")
    try:
        _set_revision(tmp_path / "books.sqlite", "0099")
        r = probe.get("/readyz")
        assert r.status_code == 503
        detail = r.json()["errors"][0]["detail"]
        assert "the database is at schema revision 0099, newer than this release knows" in detail
        assert DB_UPGRADE_ADVICE not in detail
    finally:
        probe.close()
        live.stop()


# ---- a file that is not a SQLite database ----------------------------------------------------------


def test_a_file_that_is_not_a_database_is_named_in_one_line(tmp_path):
    (tmp_path / "notadb.sqlite").write_text("hello\n")
    (tmp_path / "nobooks.jsonl").write_bytes(NO_BOOKS)
    url = "sqlite:///notadb.sqlite"
    for args in (
        ["db", "upgrade", "--database", url],
        ["export", "-", "--database", url],
        ["import", "nobooks.jsonl", "--database", url],
        ["serve", "--bind", f"127.0.0.1:{free_port()}", "--database", url],
    ):
        line = _one_line(run_berth(*args, cwd=tmp_path))
        assert "notadb.sqlite" in line and "not a SQLite database" in line, (args, line)
    assert (tmp_path / "notadb.sqlite").read_text() == "hello\n"
