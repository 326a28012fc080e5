"""``berth sim`` as the README shows it, where the optional HTTP client is not installed."""

from __future__ import annotations

import subprocess
import sys


def test_without_pycurl_the_sim_names_the_extra_to_install_in_one_line(tmp_path):
    code = (
        "import sys; sys.modules['pycurl'] = None\n"
        "from berth.cli.main import main\n"
        "sys.exit(main(['sim', '--hosts', '200', '--ops', '3000', '--concurrency', '16', '--faults', '0.05',"
        " '--seed', '1']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.strip().splitlines() == [
        "error: berth sim needs pycurl, from Berth's optional dependencies 'bench': "
        "pip install 'berth[bench]' (or -e '.[bench]' in a source checkout)"
    ]
    assert list(tmp_path.iterdir()) == []


def test_a_traceback_in_a_removed_folder_is_named_not_pointed_at():
    """A run with nothing wrong removes its folder: the report names the log with a traceback and
    says how to keep it, rather than giving a path that no longer exists; a kept one is the path."""
    from rich.console import Console

    from berth.testbed.sim.checks.invariants import Verdict
    from berth.testbed.sim.reporting.report import SimReport, Tally

    log = "/somewhere/berth-sim-x/server-1.log"

    def printed(kept_folder):
        report = SimReport({}, Tally(), 1.0, 0, 0, 0, Verdict(), log_problems=[log], kept_folder=kept_folder)
        console = Console(record=True, width=200)
        report.print(console)
        return console.export_text()

    removed = printed(None)
    assert "a traceback is logged in server-1.log (removed with the run's files; --keep-files keeps them)" in removed
    assert log not in removed
    assert f"a traceback is logged in {log}" in printed("/somewhere/berth-sim-x")
