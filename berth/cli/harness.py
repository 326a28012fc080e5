"""Argument types and defaults shared by the commands that drive a running server: ``berth bench``
and ``berth stress`` (the tools themselves are in :mod:`berth.testbed`)."""

from __future__ import annotations

import argparse
import os

# Worker processes of ``berth serve`` unless told otherwise: one more than the cores, so that one
# can run while another waits on its database; more only take turns on the cores (on two, three
# workers built providers faster than four: docs/performance.md).  At most four, to bound memory.
DEFAULT_WORKERS = min(4, (os.cpu_count() or 1) + 1)


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value
