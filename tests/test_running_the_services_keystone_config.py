"""``--auth-strategy keystone`` with an INI file it cannot use ($BERTH_KEYSTONE_CONFIG unset, naming
no file, or a file without a [keystone_authtoken] section): each service refuses it before it starts,
in one line, as it refuses a tokens or policy file it cannot use. It used to start, bind its port
and fork its workers, each of which then crashed on it (a KeyError traceback for a missing file or
section) until Granian gave up on the crash loop.

Every command runs as a real ``berth`` process, as an operator would run it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from livehelpers import run_berth

from berth.testbed.loopback import free_port

pytestmark = pytest.mark.slow


def _usage_error(done: subprocess.CompletedProcess[str]) -> str:
    """The one error line of a usage error (Click's usage and hint lines around it), exit status 2."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "granian" not in done.stderr, done.stderr  # nothing was started
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, done.stderr
    return errors[0]


@pytest.mark.parametrize("command", ["serve", "conductor"])
@pytest.mark.parametrize(
    ("ini", "problem"),
    [
        (None, "needs $BERTH_KEYSTONE_CONFIG naming an INI file with a [keystone_authtoken] section"),
        ("absent.ini", "cannot read absent.ini: No such file or directory"),
        ("other.ini", "other.ini has no [keystone_authtoken] section"),
        ("broken.ini", "broken.ini is not an INI file"),
    ],
)
def test_a_keystone_config_that_cannot_be_used_is_refused_before_start(tmp_path: Path, command, ini, problem):
    (tmp_path / "other.ini").write_text("[DEFAULT]\ndebug = true\n")
    (tmp_path / "broken.ini").write_text("www_authenticate_uri = http://keystone:5000\n")  # no section at all
    env = {"BERTH_KEYSTONE_CONFIG": ini} if ini else {}
    database = tmp_path / "books.sqlite"
    done = run_berth(
        command,
        "--bind",
        f"127.0.0.1:{free_port()}",
        "--database",
        f"sqlite:///{database}",
        "--auth-strategy",
        "keystone",
        cwd=tmp_path,
        env=env,
        timeout=30.0,
    )
    assert problem in _usage_error(done)
    assert not database.exists()
