"""A board view's weights for one kind of request, kept from pick to pick and brought up to date
only where trees changed.

A pick weighed on the board (``berth.store.pick.board.on_board``) marks the trees with room and weighs
them: about twenty passes over arrays of every tree, 1.3 ms of a pick's 3 ms at 100,000 hosts.
Between two picks of the same request only the trees claimed through this process and those a
refresh read again change (the view notes both: ``BoardView.changes_since``), so the marks and
weights of the last pick are kept (``BoardView.kept``) and worked out again for those trees alone.

The weights stay exactly those a full weighing would give now: a tree's weight depends on the
others only through each weigher's lowest and highest value among the trees that fit, and those
are kept with how many trees hold them. While no changed tree moves past a bound and some tree
still holds each, the bounds are the same and each changed tree is weighed alone with them
(``weight_of``, the same arithmetic); otherwise, or when many trees changed, everything is weighed
again. (A fresh cloud's equal hosts share their bounds: its picks take the first path; hosts that
all differ take the second about as often as a bound's holder is claimed.)

Kept only for requests whose marks and weights depend on nothing but the view and the request:
no server group's members, no trees to avoid (``on_board`` weighs those afresh). Each weighing
kept holds five arrays over the trees (about 3.3 MB at 100,000 trees); a view keeps at most
``MOST_KEPT`` of them.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from berth.domain.weighing import Multipliers
from berth.domain.weighing_arrays import Bounds, weigh_columns, weight_of
from berth.store.pick.board.host_board import BoardView, FloatArray

BoolArray = npt.NDArray[np.bool_]

# Past this share of the trees changed, weighing them all again is cheaper than one at a time: a
# tree weighed alone costs about what a full weighing of a thousand trees does (so a small cloud's
# picks, whose full weighing costs less than one tree alone, always weigh all again).
MOST_CHANGED_SHARE: Final = 1 / 1024


@dataclass(frozen=True)
class WeighedRequest:
    """What a kept weighing is of, beside the view: every input of the trees' marks and weights."""

    # (resource class, amount) of each class asked
    amounts: tuple[tuple[int, int], ...]
    # resource class -> the trees that a sharing provider with room for the amount serves
    served: Mapping[int, BoolArray]
    # the trees whose roots the request allows (None: every tree)
    roots_ok: BoolArray | None
    # each tree's free disk from the sharing providers it sees (None: none)
    shared_disk: FloatArray | None
    multipliers: Multipliers


@dataclass(frozen=True)
class Weighed:
    """A pick's copy of the kept weights: the others ``-inf``."""

    weights: FloatArray
    # how many trees fit
    fitted: int


class KeptWeights:
    """The marks and weights of one request on one view; threads share it."""

    def __init__(self, view: BoardView, request: WeighedRequest, *, most_changed_share: float = MOST_CHANGED_SHARE):
        """``most_changed_share``: the share of the trees that may have changed for them to be
        weighed alone."""
        self._view = view
        self._request = request
        self._most_changed_share = most_changed_share
        self._lock = threading.Lock()
        self._seen = view.changes_since(None)[1]
        self._weigh_all()

    def now(self) -> Weighed:
        """The weights as they are now, worked out again where the view changed since the last pick."""
        with self._lock:
            changed, seen = self._view.changes_since(self._seen)
            if changed is None or len(changed) > self._most_changed_share * len(self._fits):
                self._seen = seen
                self._weigh_all()
            elif changed:
                self._seen = seen
                if not self._weigh_changed(sorted(set(changed))):
                    self._weigh_all()
            return Weighed(self._weights.copy(), self._fitted)

    def _weigh_all(self) -> None:
        view, request = self._view, self._request
        room = np.ones(len(view.roots), dtype=bool)
        for rc, amount in request.amounts:
            may_fit = view.room_of(rc) >= amount
            served = request.served.get(rc)
            if served is not None:
                may_fit |= served
            room &= may_fit
        fits = room if request.roots_ok is None else room & request.roots_ok
        disk = view.disk + request.shared_disk if request.shared_disk is not None else view.disk.copy()
        multipliers = request.multipliers
        # The columns ``weighed_columns`` weighs (no group policy), in its order, with their names.
        named = [
            (name, values, multiplier)
            for name, values, multiplier in (
                ("ram", view.ram.copy(), multipliers.ram),
                ("cpus", view.cpus.copy(), multipliers.cpu),
                ("disk", disk, multipliers.disk),
            )
            if multiplier and len(values)
        ]
        columns = [(values, multiplier) for _, values, multiplier in named]
        fitted = int(np.count_nonzero(fits))
        self._weights, self._bounds = weigh_columns(columns, len(fits), where=None if fitted == len(fits) else fits)
        self._fits, self._fitted = fits, fitted
        # Each column's values as last weighed (the view's are written in place), its multiplier,
        # and how many trees that fit hold each bound (counted when first needed).
        self._columns = [values for values, _ in columns]
        self._multipliers = [multiplier for _, multiplier in columns]
        self._holding: list[list[int | None]] = [[None, None] for _ in columns]
        self._names = [name for name, _, _ in named]

    def _weigh_changed(self, changed: Sequence[int]) -> bool:
        """Each changed tree marked and weighed again alone; False when a bound moved (all must be)."""
        view, request = self._view, self._request
        for index in changed:
            fits = all(
                view.room_of(rc)[index] >= amount or (rc in request.served and request.served[rc][index])
                for rc, amount in request.amounts
            )
            if request.roots_ok is not None:
                fits = fits and bool(request.roots_ok[index])
            values = [self._value_now(name, index) for name in self._names]
            for column, (value, bounds) in enumerate(zip(values, self._bounds, strict=True)):
                if fits and not bounds[0] <= value <= bounds[1]:
                    return False
                self._move(column, index, bounds, value, was_in=bool(self._fits[index]), is_in=fits)
            self._fitted += int(fits) - int(self._fits[index])
            self._fits[index] = fits
            self._weights[index] = weight_of(values, self._multipliers, self._bounds) if fits else -np.inf
        return all(low and high for low, high in self._holding)

    def _move(self, column: int, index: int, bounds: Bounds, value: float, *, was_in: bool, is_in: bool) -> None:
        """One tree's value in ``column`` moved to ``value``: the counts of the bounds' holders follow."""
        values, holding = self._columns[column], self._holding[column]
        for side, bound in enumerate(bounds):
            if holding[side] is None:
                holding[side] = int(np.count_nonzero(self._fits & (values == bound)))
            count = holding[side]
            assert count is not None
            holding[side] = count - int(was_in and values[index] == bound) + int(is_in and value == bound)
        values[index] = value

    def _value_now(self, name: str, index: int) -> float:
        view, shared = self._view, self._request.shared_disk
        if name == "disk":
            return float(view.disk[index] + shared[index]) if shared is not None else float(view.disk[index])
        return float(view.ram[index] if name == "ram" else view.cpus[index])


def kept_weights(view: BoardView, request: WeighedRequest, key: object) -> Weighed:
    """The weights of ``request`` on ``view`` now, kept on the view under ``key`` (which must name
    every input of ``request`` but the view)."""
    kept = view.kept(key, lambda: KeptWeights(view, request))
    assert isinstance(kept, KeptWeights)
    return kept.now()
