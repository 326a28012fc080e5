"""The end of a process's log file, for the errors that say why a process did not come up."""

from __future__ import annotations


def tail(path: str, lines: int = 30) -> str:
    """The last ``lines`` lines of the file at ``path``, or a word that there is none."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no log)"
