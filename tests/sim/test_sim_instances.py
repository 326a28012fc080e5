"""What the simulation believes of an instance after an operation, from the journal's outcome alone:
a confirm or revert that failed midway leaves the move to be finished by the same operation."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

from berth.conductor.journal import DONE, FAILED, Operation
from berth.conductor.requests import ServerRequest
from berth.scheduler.request.flavor import Flavor
from berth.testbed.sim.instances import (
    ACTIVE,
    ALLOWED,
    DELETED,
    DELETING,
    ERROR,
    RESIZED,
    SHELVED,
    Instance,
    Instances,
    Move,
    outcome,
)
from berth.testbed.sim.workload import may_run, started_since

SMALL = Flavor("m1.small", 1, 1024, root_gb=5)
MEDIUM = Flavor("m1.medium", 2, 2048, root_gb=10)
UUID = "00000000-0000-0000-0000-000000000001"


def resized() -> Instance:
    old = ServerRequest(UUID, SMALL, "p", "u")
    move = Move("move-1", "migration-1", "host-a", old)
    return Instance(ServerRequest(UUID, MEDIUM, "p", "u"), RESIZED, "host-b", move=move)


def ended(kind: str, state: str, step: str) -> Operation:
    return Operation("op-1", kind, UUID, {"move": "move-1"}, step=step, state=state)


def test_a_confirm_failed_midway_is_to_be_confirmed_again():
    after = outcome(resized(), "confirm_resize", ended("confirm_resize", FAILED, "confirm_source"), {})
    assert after is not None and after.move is not None
    assert (after.state, after.host, after.move.finishing) == (RESIZED, "host-b", "confirm_resize")


def test_a_confirm_failed_before_any_step_changes_nothing():
    before = resized()
    assert outcome(before, "revert_resize", ended("revert_resize", FAILED, ""), {}) == before


def test_a_revert_asked_again_and_done_ends_the_move_on_the_source():
    half = outcome(resized(), "revert_resize", ended("revert_resize", FAILED, "revert_dest"), {})
    after = outcome(half, "revert_resize", ended("revert_resize", DONE, "source_guest"), {})
    assert after is not None
    assert (after.state, after.host, after.server.flavor, after.move) == (ACTIVE, "host-a", SMALL, None)


def test_half_finished_moves_are_listed_until_finished_and_deleted_ones_kept_apart():
    instances = Instances()
    half = outcome(resized(), "confirm_resize", ended("confirm_resize", FAILED, "confirm_source"), {})
    assert half is not None
    instances.put(half)
    assert [i.server.instance_uuid for i in instances.half_finished()] == [UUID]
    assert instances.take(UUID)
    assert instances.half_finished() == []
    instances.free(UUID)
    instances.put(Instance(half.server, DELETED, None))
    assert instances.items == {} and instances.half_finished() == []
    assert instances.every()[UUID].state == DELETED


def test_a_delete_failed_midway_is_to_be_deleted_again_and_nothing_else():
    active = Instance(ServerRequest(UUID, SMALL, "p", "u"), ACTIVE, "host-a")
    # Failed before any step: nothing was done, the instance is as it was.
    assert outcome(active, "delete", ended("delete", FAILED, ""), {}) == active
    half = outcome(active, "delete", ended("delete", FAILED, "destroy"), {})
    assert half is not None and half.state == DELETING and ALLOWED[DELETING] == ("delete",)
    instances = Instances()
    instances.put(half)
    assert [i.server.instance_uuid for i in instances.half_deleted()] == [UUID]
    after = outcome(half, "delete", ended("delete", DONE, "release_allocations"), {})
    assert after is not None and after.state == DELETED


def test_a_resized_instance_may_be_deleted_its_move_confirmed_first():
    """The servers API deletes a server awaiting its move's confirmation by confirming it first: the
    delete applies to the instance as the confirmation left it (active on the destination, no move),
    and one whose confirmation failed midway is only confirmed again."""
    assert "delete" in ALLOWED[RESIZED]
    confirmed = outcome(resized(), "confirm_resize", ended("confirm_resize", DONE, "confirm_dest"), {})
    assert confirmed is not None and confirmed.state == ACTIVE and confirmed.move is None
    assert confirmed.host == "host-b"
    gone = outcome(confirmed, "delete", ended("delete", DONE, "release_allocations"), {})
    assert gone is not None and gone.state == DELETED
    # The confirmation failed before any step: the delete was refused, and nothing changed.
    assert outcome(resized(), "confirm_resize", ended("confirm_resize", FAILED, ""), {}) == resized()
    half = outcome(resized(), "confirm_resize", ended("confirm_resize", FAILED, "destroy_source_guest"), {})
    assert half is not None and not may_run(half, "delete") and may_run(half, "confirm_resize")


def test_an_evacuation_that_failed_leaves_the_instance_in_error_until_evacuated_or_rebuilt():
    active = Instance(ServerRequest(UUID, SMALL, "p", "u"), ACTIVE, "host-a")
    failed = outcome(active, "evacuate", ended("evacuate", FAILED, "schedule"), {})
    assert failed is not None and (failed.state, failed.host) == (ERROR, "host-a")
    assert set(ALLOWED[ERROR]) == {"rebuild", "delete"}
    evacuated = Operation("op-2", "evacuate", UUID, {}, selections={"dest": "host-b"}, step="confirm_dest", state=DONE)
    again = outcome(failed, "evacuate", evacuated, {})
    assert again is not None and (again.state, again.host) == (ACTIVE, "host-b")
    rebuilt = outcome(failed, "rebuild", ended("rebuild", DONE, "rebuild"), {})
    assert rebuilt is not None and (rebuilt.state, rebuilt.host) == (ACTIVE, "host-a")


def test_an_evacuation_that_failed_leaves_an_instance_whose_delete_failed_midway_to_be_deleted_again():
    """The conductors evacuate a server whose delete failed midway (its row left as it was, on a
    host now down) with the others; its agent may have finished the delete when it started again,
    so the books may hold nothing for it. An evacuation that fails leaves it to be deleted again,
    not in ERROR (which expects its allocations on its host); one that is done places it anew."""
    active = Instance(ServerRequest(UUID, SMALL, "p", "u"), ACTIVE, "host-a")
    half = outcome(active, "delete", ended("delete", FAILED, "destroy"), {})
    failed = outcome(half, "evacuate", ended("evacuate", FAILED, ""), {})
    assert failed is not None and (failed.state, failed.host) == (DELETING, "host-a")
    instances = Instances()
    instances.put(failed)
    assert [i.server.instance_uuid for i in instances.half_deleted()] == [UUID]
    evacuated = Operation("op-2", "evacuate", UUID, {}, selections={"dest": "host-b"}, step="confirm_dest", state=DONE)
    placed = outcome(half, "evacuate", evacuated, {})
    assert placed is not None and (placed.state, placed.host) == (ACTIVE, "host-b")


def test_a_lost_request_is_matched_only_with_an_operation_the_run_did_not_know_of():
    # A migrate of the instance a moment before (done, then confirmed) is within the clocks' slack
    # of a second migrate whose conductor was killed under it; it is not that request's operation.
    earlier = Operation("op-old", "migrate", UUID, {}, state=DONE, created_at=100.0)
    confirm = Operation("op-confirm", "confirm_resize", UUID, {}, state=DONE, created_at=100.2)
    assert started_since([earlier, confirm], "migrate", 100.4, {"op-old", "op-confirm"}) is None
    started = Operation("op-new", "migrate", UUID, {}, created_at=100.41)
    assert started_since([earlier, confirm, started], "migrate", 100.4, {"op-old", "op-confirm"}) == "op-new"
    # Nothing known: the newest of the kind within the slack (what the run cannot tell apart).
    assert started_since([earlier], "migrate", 100.4, set()) == "op-old"
    assert started_since([earlier], "migrate", 102.0, set()) is None


def _server(n: int) -> ServerRequest:
    return ServerRequest(f"00000000-0000-0000-0000-{n:012d}", SMALL, "p", "u")


def test_an_instance_drawn_is_idle_accepted_and_taken_and_each_as_likely():
    instances = Instances()
    active = [Instance(_server(n), ACTIVE, f"host-{n % 3}") for n in range(12)]
    for instance in active:
        instances.put(instance)
    instances.put(Instance(_server(20), SHELVED, "host-0"))
    busy, pending, on_down = active[0], active[1], active[2]
    assert instances.take(busy.server.instance_uuid)
    instances.put(replace(pending, pending="op-1"))
    instances.down.add("host-2")  # active[2], [5], [8], [11]
    rng = random.Random(7)
    drawn: Counter[str] = Counter()
    for _ in range(600):
        chosen = instances.take_one((ACTIVE,), rng, lambda i: i.server.instance_uuid != active[3].server.instance_uuid)
        assert chosen is not None
        drawn[chosen.server.instance_uuid] += 1
        instances.free(chosen.server.instance_uuid)
    expected = {active[n].server.instance_uuid for n in (4, 6, 7, 9, 10)}
    assert set(drawn) == expected
    assert on_down.server.instance_uuid not in drawn
    assert min(drawn.values()) > 600 / len(expected) * 0.6  # none left aside
    assert instances.take_one((ACTIVE,), rng, lambda i: False) is None
    assert instances.take_one((RESIZED,), rng, lambda i: True) is None
    # The one drawn is taken: drawing again cannot return it while it is busy.
    first = instances.take_one((SHELVED,), rng, lambda i: True)
    assert first is not None and instances.take_one((SHELVED,), rng, lambda i: True) is None


def test_the_states_drawn_from_follow_each_instance_through_its_changes():
    instances = Instances()
    one, two = Instance(_server(1), ACTIVE, "host-a"), Instance(_server(2), ACTIVE, "host-a")
    instances.put(one)
    instances.put(two)
    instances.put(replace(one, state=SHELVED))
    assert instances.states() == {ACTIVE, SHELVED}
    assert instances.take_one((ACTIVE,), random.Random(1), lambda i: True) == two
    instances.put(Instance(two.server, DELETED, None))
    assert instances.states() == {SHELVED}
    assert instances.by_state[ACTIVE] == [] and instances.by_state[SHELVED] == [one.server.instance_uuid]
