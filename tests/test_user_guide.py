"""docs/user-guide.md and README.md kept true: their ``console`` blocks run, in order, against a real
``berth serve`` (the README's commands with its URL in place of the default endpoint's).

In a ``console`` block a line starting with ``$ `` is a command, continued by lines ending in ``\\``
or by a heredoc up to its terminator; the lines after it are output the command must print (on
standard output or error), in that order, each matching a whole line with runs of spaces compared as
one and ``…`` standing for anything. Blocks fenced otherwise (``sh``) are shown, not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from livehelpers import LiveServer

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "user-guide.md"
README = Path(__file__).resolve().parent.parent / "README.md"
DEFAULT_ENDPOINT = "http://127.0.0.1:8778"
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
ELLIPSIS = "…"
# Settings of the caller's shell that would send the guide's commands elsewhere or change their output.
CLEARED_PREFIXES = ("BERTH_", "OS_")
CLEARED = {"FORCE_COLOR", "TTY_COMPATIBLE", "COLUMNS"}


@dataclass(frozen=True)
class Step:
    """One command of the guide and the output it shows."""

    line: int  # the command's first line in the guide, counted from 1
    command: str
    expected: tuple[str, ...]


def _console_blocks(text: str) -> list[tuple[int, list[str]]]:
    """Each ``console`` block as (line number of its first line, its lines without the indentation)."""
    blocks: list[tuple[int, list[str]]] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        index += 1
        if not opening:
            continue
        indent, info = opening.groups()
        body: list[str] = []
        start = index + 1
        while index < len(lines) and not FENCE.match(lines[index]):
            body.append(lines[index].removeprefix(indent))
            index += 1
        index += 1  # the closing fence
        if info == "console":
            blocks.append((start, body))
    return blocks


def guide_steps(text: str) -> list[Step]:
    """The commands of every ``console`` block of ``text``, in order, with the output each shows."""
    steps: list[Step] = []
    for start, body in _console_blocks(text):
        index = 0
        while index < len(body):
            if not body[index].strip():
                index += 1
                continue
            if not body[index].startswith("$ "):
                raise ValueError(f"line {start + index}: output before any command in a console block")
            first = start + index
            command = [body[index][2:]]
            index += 1
            while command[-1].endswith("\\") and index < len(body):
                command.append(body[index])
                index += 1
            heredoc = HEREDOC.search(command[0])
            if heredoc:
                while index < len(body) and body[index] != heredoc.group(2):
                    command.append(body[index])
                    index += 1
                if index == len(body):
                    raise ValueError(f"line {first}: heredoc without its {heredoc.group(2)} line")
                command.append(body[index])
                index += 1
            expected = []
            while index < len(body) and not body[index].startswith("$ "):
                if body[index].strip() and body[index].strip() != ELLIPSIS:
                    expected.append(body[index])
                index += 1
            steps.append(Step(first, "\n".join(command), tuple(expected)))
    return steps


def _loose(line: str) -> str:
    return " ".join(line.split())


def _pattern(expected: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(piece) for piece in _loose(expected).split(ELLIPSIS)))


def first_missing(expected: tuple[str, ...], output: str) -> str | None:
    """The first expected line that no line of ``output`` after the previous one's match matches."""
    lines = [_loose(line) for line in output.splitlines()]
    position = 0
    for wanted in expected:
        pattern = _pattern(wanted)
        while position < len(lines) and not pattern.fullmatch(lines[position]):
            position += 1
        if position == len(lines):
            return wanted
        position += 1
    return None


# --------------------------------------------------------------------------------------------------
# The convention itself.

SAMPLE = """
Shown only:

```sh
berth serve
```

```console
$ echo one \\
    two
one two
$ cat > f.yaml <<'EOF'
a: 1
$ not a command
EOF
$ berth provider list
…
│ compute1 │ … │
```

- a list item

  ```console
  $ true
  ```
"""


def test_steps_are_the_console_blocks_commands_with_their_output():
    steps = guide_steps(SAMPLE)
    assert [step.command for step in steps] == [
        "echo one \\\n    two",
        "cat > f.yaml <<'EOF'\na: 1\n$ not a command\nEOF",
        "berth provider list",
        "true",
    ]
    assert [step.expected for step in steps] == [("one two",), (), ("│ compute1 │ … │",), ()]
    assert steps[0].line == 9  # the line of "$ echo one"
    with pytest.raises(ValueError, match="output before any command"):
        guide_steps("```console\nprinted\n```\n")
    with pytest.raises(ValueError, match="heredoc without its EOF line"):
        guide_steps("```console\n$ cat <<EOF\nx\n```\n")


def test_expected_lines_match_whole_lines_in_order_with_loose_spaces():
    output = "3 resource providers\n│ compute1    │ 2 │   - │\n│ compute2 │ 1 │ - │\n"
    assert first_missing(("3 resource providers", "│ compute1 │ … │ - │", "│ compute2 │ 1 │ - │"), output) is None
    assert first_missing(("│ compute2 │ 1 │ - │", "│ compute1 │ … │"), output) == "│ compute1 │ … │"
    assert first_missing(("compute1",), output) == "compute1"  # a part of a line is not the line
    assert first_missing(("3 resource providers", "3 resource providers"), output) == "3 resource providers"


def test_the_guide_runs_every_client_command_and_the_books_commands():
    commands = " ".join(step.command for step in guide_steps(GUIDE.read_text()))
    for words in (
        "berth agent",
        "berth provider list",
        "berth provider show",
        "berth provider tree",
        "berth inventory show",
        "berth inventory set",
        "berth trait list",
        "berth usage show",
        "berth usage show --project",
        "berth allocation show",
        "berth candidates",
        "--explain",
        "berth lease list",
        "berth lease release",
        "berth quota set",
        "berth quota list",
        "berth quota delete",
        "-f json",
        "-f yaml",
        "berth export",
        "berth import",
        "berth db upgrade",
    ):
        assert words in commands, words


# --------------------------------------------------------------------------------------------------
# The guide against a real server.


def _environment(url: str) -> dict[str, str]:
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(CLEARED_PREFIXES) and name not in CLEARED
    }
    environment["BERTH_URL"] = url
    environment["PATH"] = os.path.dirname(sys.executable) + os.pathsep + environment.get("PATH", "")
    return environment


def _run_as_shown(document: Path, folder: Path, *, endpoint_in_commands: bool) -> None:
    """Run every ``console`` block of ``document`` in ``folder`` against a server of its own, and check
    the output each shows; with ``endpoint_in_commands`` the commands name the default endpoint, which
    is replaced by the server's."""
    steps = guide_steps(document.read_text())
    # berth.sqlite in the folder the commands run in: the file `berth export` reads by default.
    server = LiveServer(f"sqlite:///{folder / 'berth.sqlite'}", workers=2)
    try:
        environment = _environment(server.url)
        for step in steps:
            command = step.command.replace(DEFAULT_ENDPOINT, server.url) if endpoint_in_commands else step.command
            done = subprocess.run(
                ["bash", "-o", "pipefail", "-c", command],
                cwd=folder,
                env=environment,
                capture_output=True,
                text=True,
                timeout=180,
            )
            output = done.stdout + done.stderr
            where = f"{document.name} line {step.line}: {step.command}\n--- output:\n{output[-4000:]}"
            assert done.returncode == 0, where
            missing = first_missing(step.expected, output)
            assert missing is None, f"{where}\n--- not printed: {missing}"
    finally:
        server.stop()


@pytest.mark.slow
def test_every_console_block_of_the_guide_runs_as_shown(tmp_path):
    _run_as_shown(GUIDE, tmp_path, endpoint_in_commands=False)


def test_the_readme_runs_its_api_and_openstack_client_examples():
    commands = " ".join(step.command for step in guide_steps(README.read_text()))
    for words in ("curl -s http://127.0.0.1:8778/", "openstack --os-auth-type admin_token --os-token admin"):
        assert words in commands, words


@pytest.mark.slow
def test_every_console_block_of_the_readme_runs_as_shown(tmp_path):
    _run_as_shown(README, tmp_path, endpoint_in_commands=True)
