"""The trees a pick is asked to avoid (``avoid_trees``): neither chosen, nor made room on by
preempting, nor named as alternates.

The caller knows what the books cannot tell: a conductor sees a host's agent stop beating, and
the host's inventory still looks free. Nova's scheduler leaves such a host out with its
ComputeFilter; asking the pick to avoid it keeps the pick (and its preemption) in use while some
host is down, where the caller would otherwise have to take the Placement API's path and filter
the hosts itself.

A uuid names the tree of that provider (a root, usually); one that names no provider is no error,
as an unknown ``in_tree`` is none: the host may have been deleted since the caller saw it down.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Final, TypeVar

import numpy as np
from sqlalchemy import Connection

from berth.store.candidates.names import roots_of_trees

# The most trees one request names (a cloud's hosts down at once, with room to spare).
MAX_AVOIDED: Final = 10_000

_Value = TypeVar("_Value")


def avoided_roots(conn: Connection, uuids: Collection[str]) -> frozenset[int]:
    """The root ids of the trees named."""
    if not uuids:
        return frozenset()
    return frozenset(roots_of_trees(conn, uuids).values())


def without_avoided(by_root: Mapping[int, _Value], avoided: frozenset[int]) -> dict[int, _Value]:
    """``by_root`` less the avoided trees, in its order."""
    return {root: value for root, value in by_root.items() if root not in avoided}


def board_mask(roots: np.ndarray, avoided: frozenset[int]) -> np.ndarray:
    """Of the board's roots, those not avoided (a boolean array)."""
    if not avoided:
        return np.ones(len(roots), dtype=bool)
    return ~np.isin(roots, np.fromiter(avoided, dtype=np.int64, count=len(avoided)))
