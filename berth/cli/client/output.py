"""What the client commands print: Rich tables and trees for people, the API's data for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import click
import yaml
from rich.console import Console, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from berth.domain.capacity import capacity as capacity_rule

# Piped into a file or another program, a table keeps whole uuids on one line rather than the
# 80 columns (or $COLUMNS) Rich assumes without a terminal.
PIPE_WIDTH = 200


def console() -> Console:
    return Console(width=None if sys.stdout.isatty() else PIPE_WIDTH, highlight=False)


def emit(output: str, data: Any, render: Callable[[], Iterable[RenderableType]]) -> None:
    """``data`` (the API's answer) as JSON or YAML, or what ``render`` draws of it."""
    if output == "json":
        click.echo(json.dumps(data, indent=2))
    elif output == "yaml":
        click.echo(yaml.safe_dump(data, sort_keys=False, default_flow_style=False), nl=False)
    else:
        out = console()
        for renderable in render():
            out.print(renderable)


def table(title: str | None, columns: Iterable[str], rows: Iterable[Iterable[object]], *, numeric: int = 0) -> Table:
    """A table whose last ``numeric`` columns are right-aligned numbers."""
    names = list(columns)
    # The title and the cells are the books' own text (names an operator chose, such as "rack[/b]7"),
    # never Rich markup: read as markup, a name shows wrong, or stops the table with a MarkupError.
    grid = Table(
        title=None if title is None else Text(title, style="table.title"), title_justify="left", header_style="bold"
    )
    for index, name in enumerate(names):
        grid.add_column(name, justify="right" if index >= len(names) - numeric else "left", overflow="fold")
    for row in rows:
        grid.add_row(*(cell if isinstance(cell, Text | ProgressBar) else Text(_text(cell)) for cell in row))
    return grid


def _text(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def fields(title: str, values: Mapping[str, object]) -> Table:
    """A two-column table of one object's fields."""
    return table(title, ("field", "value"), values.items())


def capacity(inventory: Mapping[str, Any]) -> int:
    """What a provider may hand out of one class, by the capacity rule, from the API's inventory."""
    return capacity_rule(
        int(inventory["total"]), int(inventory.get("reserved", 0)), float(inventory.get("allocation_ratio", 1.0))
    )


def bar(used: int, total: int) -> ProgressBar:
    return ProgressBar(total=max(total, 1), completed=min(used, max(total, 1)), width=30)


def percent(used: int, total: int) -> str:
    return f"{100 * used / total:.0f}%" if total else "-"


def note(message: str) -> Text:
    return Text(message, style="italic")
