"""A YAML file an operator gives a service (its tokens, its policy rules), read once as it starts:
what is wrong with it is said in one line naming the file, not in a worker's traceback."""

from __future__ import annotations

from collections.abc import Callable

import yaml


def read_yaml(path: str, what: str, error: Callable[[str], Exception], *, forms: str = "YAML") -> object:
    """The document of the file; ``error(message)`` raised naming the file (``what``: "the tokens
    file") and why it cannot be read (``forms``: what it should be written in)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return yaml.safe_load(handle)
    except OSError as failure:
        raise error(f"cannot read {what} {path}: {failure.strerror}") from None
    except UnicodeDecodeError:
        raise error(f"{what} {path} is not text: give a {forms} file") from None
    except yaml.YAMLError as failure:
        where = getattr(failure, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
        problem = getattr(failure, "problem", None) or str(failure).splitlines()[0]
        raise error(f"{what} {path} is not valid {forms}: {problem}{at}") from None
