"""``berth``'s commands are imported by name when they run (``berth.cli.main.COMMANDS``): the names
must list every top-level command the modules of ``berth.cli`` define, and nothing else."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

import berth.cli
from berth.cli.main import COMMANDS, cli


def _module_commands() -> list[click.Command]:
    found: dict[int, click.Command] = {}
    for info in pkgutil.walk_packages(berth.cli.__path__, "berth.cli."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, click.Command):
                found[id(value)] = value
    return list(found.values())


def test_the_names_list_every_top_level_command_of_the_modules():
    commands = _module_commands()
    nested = {id(sub) for command in commands if isinstance(command, click.Group) for sub in command.commands.values()}
    top_level = {command.name for command in commands if id(command) not in nested} - {"cli"}
    assert top_level == set(COMMANDS)  # ``db`` is defined in berth.cli.main, on the group itself
    context = click.Context(cli)
    for name in COMMANDS:
        command = cli.get_command(context, name)
        assert command is not None and command.name == name


def test_the_server_group_has_its_actions_when_loaded_by_name():
    result = CliRunner().invoke(cli, ["server", "--help"])
    assert result.exit_code == 0, result.output
    for action in ("resize", "live-migrate", "evacuate", "shelve", "unshelve"):
        assert f" {action} " in result.output


def test_starting_berth_imports_no_command_it_does_not_run():
    code = (
        "import json, sys; import berth.cli.main; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('berth'))))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(loaded) == ["berth", "berth.cli", "berth.cli.main"]


def test_a_conductors_worker_loads_neither_numpy_nor_the_service():
    """A conductor started again after a crash pays for its imports before it answers: numpy (the
    service's host board) and the service's store are not among them."""
    code = (
        "import json, sys; import berth.conductor.api.app, berth.conductor.control.plane; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('numpy', 'berth.store', 'berth.api')))))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(loaded) == []


@pytest.mark.parametrize("command", ["bench", "stress", "sim"])
def test_a_report_file_that_cannot_be_written_is_refused_before_the_run(command, tmp_path):
    """A run of many minutes must not end in a traceback because its ``--json`` file cannot be
    written: the option is checked first, and says what to do."""
    runner = CliRunner()
    missing = runner.invoke(cli, [command, "--json", str(tmp_path / "absent" / "report.json")])
    assert missing.exit_code == 2 and "does not exist; create it first" in missing.output
    folder = runner.invoke(cli, [command, "--json", str(tmp_path)])
    assert folder.exit_code == 2 and "is a directory" in folder.output
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    if not os.access(locked, os.W_OK):  # root may write anywhere
        denied = runner.invoke(cli, [command, "--json", str(locked / "report.json")])
        assert denied.exit_code == 2 and "cannot be written" in denied.output
