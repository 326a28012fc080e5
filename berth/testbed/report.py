"""What the tools tell their user: progress lines on stderr, tables on stdout, a JSON file."""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


class Log:
    """``log(message)`` prints ``[tool HH:MM:SS] message`` to stderr."""

    def __init__(self, tool: str):
        self.tool = tool

    def __call__(self, message: str) -> None:
        print(f"[{self.tool} {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Column:
    title: str
    width: int = 0  # at least; wider when the title or a cell is
    align: str = ">"  # ">" right, "<" left


RULE = None  # a row of dashes, where it stands among the rows


class Table:
    """Columns of text padded to a common width, joined by ``separator``."""

    def __init__(self, columns: Sequence[Column], separator: str = "  "):
        self.columns = list(columns)
        self.separator = separator

    def render(self, rows: Sequence[Sequence[str] | None]) -> list[str]:
        """The title line, then one line per row; :data:`RULE` rows become dashes under each column."""
        cells = [row for row in rows if row is not RULE]
        widths = [
            max(column.width, len(column.title), *(len(row[i]) for row in cells))
            for i, column in enumerate(self.columns)
        ]
        lines = [self._line([c.title for c in self.columns], widths)]
        for row in rows:
            if row is RULE:
                lines.append(self.separator.join("-" * w for w in widths))
            else:
                lines.append(self._line(row, widths))
        return lines

    def _line(self, values: Sequence[str], widths: list[int]) -> str:
        return self.separator.join(
            f"{value:{column.align}{width}}" for value, column, width in zip(values, self.columns, widths, strict=True)
        )


def write_json(path: str, document: Any) -> None:
    with open(path, "w") as f:
        json.dump(document, f, indent=2)


def percentile(values: Sequence[float], pct: int) -> float:
    """The ``pct``-th percentile of at least one value (the value itself when there is one)."""
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[pct - 1]
