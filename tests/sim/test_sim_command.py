"""``berth sim``'s command and its report."""

from __future__ import annotations


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
