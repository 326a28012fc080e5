"""``--json FILE``: where a load run writes its report, checked before the run starts, so that a
run of many minutes does not end in a traceback because the file cannot be written."""

from __future__ import annotations

import os
from typing import Any

import click


class ReportFile(click.ParamType[str]):
    """A file to write (created or replaced) in a directory that exists and may be written."""

    name = "FILE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        path = str(os.fspath(value))
        if os.path.isdir(path):
            self.fail(f"{path!r} is a directory; name a file in it", param, ctx)
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            self.fail(f"the directory {folder!r} does not exist; create it first or name a file elsewhere", param, ctx)
        if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
            self.fail(f"{path!r} cannot be written (permission denied); name a file you may write", param, ctx)
        return path
