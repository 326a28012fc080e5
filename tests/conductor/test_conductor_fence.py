"""A conductor that cannot write its heartbeat fences itself off before anyone may take its
operations over: it starts no step of them, and acts under a new name once it can write again, so
that its old operations are resumed by whoever comes first (``berth.conductor.fence``)."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest
from conductorhelpers import assert_nothing_left, guests_of, server

from berth.conductor.fence import Fence, Fenced
from berth.conductor.journal import ROLLED_BACK, RUNNING, Operation, TakenOver
from berth.conductor.runner import ConductorConfig


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def owned_by(owner: str) -> Operation:
    return Operation("op-1", "build", "instance-1", {}, owner=owner)


def test_a_silence_past_the_fence_stops_every_step_and_retires_the_name_for_good():
    clock = Clock()
    fence = Fence("conductor-a", 3.0, clock)
    clock.now += 60
    fence.check(owned_by("conductor-a"))  # not armed: a conductor without a heartbeat is never fenced
    fence.arm()
    clock.now += 2.0
    fence.beaten(fence.before_beat())
    clock.now += 2.9
    fence.check(owned_by("conductor-a"))
    clock.now += 0.2  # 3.1 s since the last heartbeat
    with pytest.raises(Fenced) as fenced:
        fence.check(owned_by("conductor-a"))
    assert isinstance(fenced.value, TakenOver) and "no heartbeat in time" in str(fenced.value)
    # A heartbeat that got through late does not give the name back.
    fence.beaten("conductor-a")
    with pytest.raises(Fenced):
        fence.check(owned_by("conductor-a"))
    renamed = fence.before_beat()
    assert renamed != "conductor-a" and renamed.startswith("conductor-")
    fence.beaten(renamed)
    fence.check(owned_by(renamed))
    with pytest.raises(Fenced) as old:
        fence.check(owned_by("conductor-a"))
    assert f"now acts as {renamed}" in str(old.value)


def test_a_heartbeat_written_after_a_long_wait_retires_the_name():
    """No step was checked during the silence; the heartbeat itself came too late."""
    clock = Clock()
    fence = Fence("conductor-a", 3.0, clock)
    fence.arm()
    owner = fence.before_beat()
    clock.now += 5.0  # the statement waited on the database
    fence.beaten(owner)
    assert fence.before_beat() != owner


def test_without_a_fence_the_name_never_changes():
    clock = Clock()
    fence = Fence("conductor-a", None, clock)
    fence.arm()
    clock.now += 3600
    fence.check(owned_by("conductor-a"))
    assert fence.before_beat() == "conductor-a"


def test_the_fence_defaults_to_half_the_time_after_which_others_take_over():
    assert ConductorConfig().fencing_after == 30.0
    assert ConductorConfig(dead_after=8.0, heartbeat_interval=1.0).fencing_after == 4.0
    # A conductor told to take over at once (tests make such successors) fences nothing.
    assert ConductorConfig(dead_after=0, heartbeat_interval=0.2).fencing_after is None
    with pytest.raises(ValueError, match="fence_after"):
        ConductorConfig(heartbeat_interval=10.0, fence_after=5.0)


class Hold:
    """A step hook that stops the operation before ``step`` until released."""

    def __init__(self, step):
        self.step = step
        self.reached = threading.Event()
        self.release = threading.Event()
        self.steps: list[str] = []

    def __call__(self, operation, step):
        self.steps.append(step)
        if step == self.step:
            self.reached.set()
            assert self.release.wait(30)


def test_a_conductor_whose_journal_refuses_its_heartbeat_starts_no_further_step(
    conductors, placement, clients, instance_uuid, caplog
):
    """The journal's database refuses the conductor's writes (another connection holds its write
    lock) while a build waits before its spawn: past the fence, the build stops there as if its
    conductor had died, spawns nothing, and another conductor undoes it once it is silent."""
    hold = Hold("spawn")
    first = conductors(hook=hold, dead_after=3.0)
    first.start()
    outcome: list[BaseException | Operation] = []

    def build() -> None:
        try:
            outcome.append(first.build(server(instance_uuid)))
        except BaseException as e:  # noqa: BLE001 - the test reads it
            outcome.append(e)

    worker = threading.Thread(target=build)
    worker.start()
    assert hold.reached.wait(30)
    name = first.owner
    blocker = sqlite3.connect(conductors.url.removeprefix("sqlite:///"), timeout=30)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        time.sleep(first.config.fencing_after + 0.5)
        hold.release.set()
        worker.join(30)
    finally:
        blocker.rollback()
        blocker.close()
    [fenced] = outcome
    assert isinstance(fenced, Fenced), fenced
    assert hold.steps[-1] == "spawn" and guests_of(clients, instance_uuid) == {}
    (left,) = first.journal.for_instance(instance_uuid)
    assert left.state == RUNNING and left.owner == name and "spawn" not in left.selections.get("steps_done", [])

    # Once it can write again it goes on under a new name; its old operation is anyone's to resume.
    deadline = time.monotonic() + 30
    while first.owner == name and time.monotonic() < deadline:
        time.sleep(0.1)
    assert first.owner != name
    [said] = [r for r in caplog.records if r.name == "berth.conductor.conductor" and name in r.getMessage()]
    assert said.levelname == "WARNING" and f"goes on as {first.owner}" in said.getMessage()
    assert float(said.getMessage().split("(the last ")[1].split(" s ago")[0]) > first.config.fencing_after
    deadline = time.monotonic() + 30
    resumed = []
    while not resumed and time.monotonic() < deadline:
        resumed = conductors(dead_after=3.0).resume()
        time.sleep(0.2)
    assert [(op.id, op.state) for op in resumed] == [(left.id, ROLLED_BACK)]
    assert_nothing_left(placement, clients, instance_uuid)
