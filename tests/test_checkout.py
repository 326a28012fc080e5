"""What a source checkout gives an operator: scripts/serve and the files git leaves alone."""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Stands for the virtual environment's python: records each call, and "installs" the berth command.
FAKE_PYTHON = """#!/usr/bin/env bash
echo "python $*" >> "$(dirname "$0")/../../calls"
if [ "$1 $2 $3" = "-m pip install" ]; then
    printf '#!/usr/bin/env bash\\necho "berth $*" >> "$(dirname "$0")/../../calls"\\n' > "$(dirname "$0")/berth"
    chmod +x "$(dirname "$0")/berth"
fi
"""


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_scripts_serve_installs_only_when_missing_or_when_pyproject_changed(tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "serve", checkout / "scripts" / "serve")
    (checkout / "pyproject.toml").write_text('[project]\nname = "berth"\n')
    (checkout / ".venv" / "bin").mkdir(parents=True)
    _executable(checkout / ".venv" / "bin" / "python", FAKE_PYTHON)
    calls = checkout / "calls"

    def serve() -> list[str]:
        subprocess.run(["bash", str(checkout / "scripts" / "serve"), "--workers", "1"], check=True, timeout=30)
        made = calls.read_text().splitlines()
        calls.unlink()
        return made

    installs = f"python -m pip install --quiet -e {checkout}"
    # Berth's modules compiled at each start (only those changed since are), then the service.
    starts = [f"python -m compileall -q {checkout}/berth", "berth serve --workers 1"]
    assert serve() == [installs, *starts]
    assert serve() == starts
    (checkout / "pyproject.toml").write_text('[project]\nname = "berth"\ndependencies = ["click"]\n')
    assert serve() == [installs, *starts]
    assert serve() == starts
    (checkout / ".venv" / "bin" / "berth").unlink()
    assert serve() == [installs, *starts]


def test_git_ignores_what_berth_serve_leaves_beside_its_sqlite_file():
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    for name in ("berth.sqlite", "berth.sqlite-wal", "berth.sqlite.writer-lock"):
        done = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", "--no-index", name], timeout=30)
        assert done.returncode == 0, f"{name} is not ignored"
