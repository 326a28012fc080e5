"""A board view's weights kept between picks (berth.store.pick.board.kept_weights): after any changes
the view notes, they are exactly those a full weighing of the view as it is now gives."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from berth.domain.weighing import Multipliers
from berth.domain.weighing_arrays import weigh_arrays
from berth.store.pick.board import host_board
from berth.store.pick.board.host_board import BoardView
from berth.store.pick.board.kept_weights import KeptWeights, WeighedRequest

VCPU, RAM, DISK = 1, 2, 3
WEIGHED = {VCPU: "VCPU", RAM: "MEMORY_MB", DISK: "DISK_GB"}
# Few values, so that trees tie and bounds are shared, held by one tree, and moved past.
amounts = st.sampled_from([0.0, 1.0, 2.0, 4.0, 8.0])


def _view(columns: list[tuple[float, float, float]]) -> BoardView:
    count = len(columns)
    ram, cpus, disk = (np.array([tree[i] for tree in columns], dtype=np.float64) for i in range(3))
    return BoardView(
        roots=np.arange(100, 100 + count, dtype=np.int64),
        index_of={100 + i: i for i in range(count)},
        room={VCPU: cpus.copy(), RAM: ram.copy(), DISK: disk.copy()},
        ram=ram,
        cpus=cpus,
        disk=disk,
        by_aggregate={},
        by_root_trait={},
    )


def _weighed_afresh(view: BoardView, request: WeighedRequest) -> tuple[list[float], int]:
    fits = np.ones(len(view.roots), dtype=bool)
    for rc, amount in request.amounts:
        may_fit = view.room_of(rc) >= amount
        if rc in request.served:
            may_fit |= request.served[rc]
        fits &= may_fit
    if request.roots_ok is not None:
        fits &= request.roots_ok
    disk = view.disk + request.shared_disk if request.shared_disk is not None else view.disk
    fitted = int(np.count_nonzero(fits))
    where = None if fitted == len(fits) else fits
    weights = weigh_arrays(view.ram, view.cpus, disk, np.zeros(0), request.multipliers, where=where)
    return weights.tolist(), fitted


change = st.one_of(
    # a claim through this process: (index, vcpus, ram, disk) taken off the tree
    st.tuples(st.just("take"), st.integers(0, 11), amounts, amounts, amounts),
    # a refresh that read the tree again: its room and free amounts as they are now
    st.tuples(st.just("read"), st.integers(0, 11), amounts, amounts, amounts),
)


@settings(max_examples=300, deadline=None)
@given(
    trees=st.lists(st.tuples(amounts, amounts, amounts), min_size=1, max_size=12),
    asked=st.tuples(amounts, amounts, amounts),
    multipliers=st.tuples(
        st.sampled_from([0.0, 1.0, -1.0, 2.5]), st.sampled_from([0.0, 1.0, -0.5]), st.sampled_from([0.0, 1.0])
    ),
    served=st.lists(st.booleans(), min_size=12, max_size=12),
    roots=st.one_of(st.none(), st.lists(st.booleans(), min_size=12, max_size=12)),
    shared=st.one_of(st.none(), st.lists(amounts, min_size=12, max_size=12)),
    changes=st.lists(st.lists(change, max_size=4), max_size=6),
)
def test_kept_weights_are_those_weighed_afresh_after_any_changes(
    trees, asked, multipliers, served, roots, shared, changes
):
    view = _view(trees)
    count = len(trees)
    request = WeighedRequest(
        amounts=((VCPU, int(asked[0])), (RAM, int(asked[1])), (DISK, int(asked[2]))),
        served={DISK: np.array(served[:count])},
        roots_ok=np.array(roots[:count]) if roots is not None else None,
        shared_disk=np.array(shared[:count]) if shared is not None else None,
        multipliers=Multipliers(ram=multipliers[0], cpu=multipliers[1], disk=multipliers[2]),
    )
    # (Every change weighed alone, as a large cloud's few would be.)
    kept = KeptWeights(view, request, most_changed_share=1.0)
    for batch in [[], *changes]:
        for kind, index, vcpus, ram, disk in batch:
            index %= count
            if kind == "take":
                view.take(index, {VCPU: int(vcpus), RAM: int(ram), DISK: int(disk)}, WEIGHED)
            else:
                for rc, value in ((VCPU, vcpus), (RAM, ram), (DISK, disk)):
                    view.room[rc][index] = value
                view.ram[index], view.cpus[index], view.disk[index] = ram, vcpus, disk
                view.note_changed([index])
        weighed = kept.now()
        assert (weighed.weights.tolist(), weighed.fitted) == _weighed_afresh(view, request)


def test_a_view_forgets_changes_past_its_bound_and_kept_weights_weigh_all_again(monkeypatch):
    monkeypatch.setattr(host_board, "MOST_CHANGES_NOTED", 4)
    view = _view([(8.0, 8.0, 8.0)] * 3)
    request = WeighedRequest(((VCPU, 1),), {}, None, None, Multipliers())
    kept = KeptWeights(view, request)
    _, seen = view.changes_since(None)
    for _ in range(5):
        view.take(0, {VCPU: 1}, WEIGHED)
    assert view.changes_since(seen)[0] is None
    assert kept.now().weights.tolist() == _weighed_afresh(view, request)[0]
    assert kept.now().weights[0] < kept.now().weights[1]
