"""The cycle collector is held off during requests and back on after them, also when they fail
and when several threads serve requests at once."""

from __future__ import annotations

import gc
import threading

import pytest

from berth.web import collector
from berth.web.collector import CollectorPausedDuringRequests


@pytest.fixture(autouse=True)
def collector_enabled():
    was_enabled = gc.isenabled()
    gc.enable()
    yield
    if not was_enabled:
        gc.disable()


def _start_response(status, headers, exc_info=None):
    return None


def test_collector_off_during_a_request_and_on_after_it():
    seen = []

    def app(environ, start_response):
        seen.append(gc.isenabled())
        return [b"ok"]

    assert CollectorPausedDuringRequests(app)({}, _start_response) == [b"ok"]
    assert seen == [False]
    assert gc.isenabled()


def test_collector_back_on_after_a_failed_request():
    def app(environ, start_response):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        CollectorPausedDuringRequests(app)({}, _start_response)
    assert gc.isenabled()


def test_collector_left_off_if_it_was_off():
    gc.disable()
    CollectorPausedDuringRequests(lambda environ, start_response: [b""])({}, _start_response)
    assert not gc.isenabled()


def test_overlapping_requests_keep_it_off_until_the_last_one_ends():
    first_inside, release_first = threading.Event(), threading.Event()
    states = {}

    def app(environ, start_response):
        if environ["name"] == "first":
            first_inside.set()
            release_first.wait(10)
        states[environ["name"]] = gc.isenabled()
        return [b""]

    wrapped = CollectorPausedDuringRequests(app)
    first = threading.Thread(target=wrapped, args=({"name": "first"}, _start_response))
    first.start()
    assert first_inside.wait(10)
    wrapped({"name": "second"}, _start_response)
    after_second = gc.isenabled()
    release_first.set()
    first.join(10)
    assert states == {"first": False, "second": False}
    assert not after_second
    assert gc.isenabled()


def test_requests_that_always_overlap_still_collect(monkeypatch):
    monkeypatch.setattr(collector, "MOST_OBJECTS_WITHOUT_COLLECTION", 100)
    garbage_collected = []
    gc.callbacks.append(lambda phase, info: garbage_collected.append(phase))
    try:
        release = threading.Event()
        inside = threading.Event()

        def app(environ, start_response):
            if environ["name"] == "long":
                inside.set()
                release.wait(10)
            else:
                environ["junk"] = [[] for _ in range(1000)]
            return [b""]

        wrapped = CollectorPausedDuringRequests(app)
        long_request = threading.Thread(target=wrapped, args=({"name": "long"}, _start_response))
        long_request.start()
        assert inside.wait(10)
        garbage_collected.clear()
        junk_holder = {"name": "short"}
        wrapped(junk_holder, _start_response)
        assert "start" in garbage_collected
        release.set()
        long_request.join(10)
    finally:
        gc.callbacks.pop()
