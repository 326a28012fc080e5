"""What the conductor's tests ask for and check: servers, and the books of every host and of the service."""

from __future__ import annotations

import contextlib
import time

import requests
from agenthelpers import assert_remote_books_agree

from berth.clients.http import NotConnected, TransportError
from berth.conductor.control.host_books import set_disabled
from berth.conductor.journal import RUNNING
from berth.conductor.requests import ServerRequest
from berth.scheduler.request.flavor import Flavor

# The hosts of the conductor's tests (conftest.py says why they are so).
NARROW = {"cells": [{"cpus": 2, "memory_mb": 16384}, {"cpus": 2, "memory_mb": 16384}], "disk_gb": 100}
WIDE = {"cells": [{"cpus": 4, "memory_mb": 8192}], "disk_gb": 100}
HOSTS = {"narrow-1": NARROW, "narrow-2": NARROW, "wide": WIDE}

PLAIN = Flavor("m1.small", vcpus=1, memory_mb=512, root_gb=1)
BIGGER = Flavor("m1.medium", vcpus=2, memory_mb=1024, root_gb=2)
# One NUMA cell of 3 vCPUs: Placement offers every host, only the wide host's agent can claim it.
THREE_IN_ONE_CELL = Flavor("m1.cell3", vcpus=3, memory_mb=4096, root_gb=1, extra_specs={"hw:numa_nodes": "1"})
# As above with more memory than the wide host has: no host can take it.
TOO_BIG_FOR_ANY = Flavor("m1.cell3big", vcpus=3, memory_mb=12288, root_gb=1, extra_specs={"hw:numa_nodes": "1"})


def server(instance_uuid, flavor=PLAIN) -> ServerRequest:
    return ServerRequest(instance_uuid, flavor, "project", "user")


@contextlib.contextmanager
def only_host_enabled(placement, clients, host):
    """Every other host disabled (``COMPUTE_STATUS_DISABLED``), so that the scheduler picks ``host``."""
    others = [name for name in clients if name != host]
    for name in others:
        set_disabled(placement, name, True)
    try:
        yield
    finally:
        for name in others:
            set_disabled(placement, name, False)


def lease_of(placement, consumer):
    """The consumer's lease, or None."""
    response = requests.get(f"{placement.url}/berth/leases/{consumer}", headers=placement.headers, timeout=10)
    if response.status_code == 404:
        return None
    response.raise_for_status()
    return response.json()


def claims_of(clients, instance_uuid):
    """Host name -> the instance's claims there, for the hosts that have any."""
    found = {}
    for name, client in clients.items():
        claims = client.claims_for_instance(instance_uuid)
        if claims:
            found[name] = claims
    return found


def guests_of(clients, instance_uuid):
    """Host name -> the claim id the instance's guest runs in there."""
    return {
        name: guest["claim_id"]
        for name, client in clients.items()
        for guest in client.guests()
        if guest["uuid"] == instance_uuid
    }


def assert_books_agree(placement, clients):
    """Every host's claims, capacity and audit agree with what the service holds."""
    assert_remote_books_agree(placement, *clients.values())


def assert_nothing_left(placement, clients, *consumers):
    """No allocation, lease or claim remains for any of the consumers."""
    for consumer in consumers:
        assert placement.consumer(consumer).allocations == {}
        assert lease_of(placement, consumer) is None
        assert claims_of(clients, consumer) == {}
    assert_books_agree(placement, clients)


def ended(plane, operation_id, timeout=60.0):
    """The control plane's operation once it is no longer running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        operation = plane.journal.get(operation_id)
        if operation is not None and operation.state != RUNNING:
            return operation
        time.sleep(0.05)
    raise AssertionError(f"operation {operation_id} still running after {timeout} s")


class FirstClaimUnanswered:
    """An agent's client whose first claim by ``claim`` (a method's name, of any host's client) is
    not answered: ``lost``, it lands and its answer is lost, as when the agent is killed between its
    write and its reply; else the connection is refused and nothing is sent. ``first`` gets the host
    it was sent to; ``asked`` each host whose ``let_go`` (a method's name) is called."""

    def __init__(self, client, claim, let_go, first, lost, asked):
        self.client, self.claim, self.let_go = client, claim, let_go
        self.first, self.lost, self.asked = first, lost, asked

    def __getattr__(self, name):
        if name == self.claim:
            return self._claim_once
        if name == self.let_go:
            return self._letting_go
        return getattr(self.client, name)

    def _claim_once(self, *args, **kwargs):
        claim = getattr(self.client, self.claim)
        if self.first:
            return claim(*args, **kwargs)
        self.first.append(self.client.host)
        if not self.lost:
            raise NotConnected("connection refused")
        claim(*args, **kwargs)
        raise TransportError("Connection aborted: the agent closed the connection without a response")

    def _letting_go(self, *args, **kwargs):
        self.asked.append(self.client.host)
        return getattr(self.client, self.let_go)(*args, **kwargs)


class FirstAnswerLost:
    """An agent's client whose first call of ``method`` (of any host's client) lands and whose
    answer is lost, as when the agent is killed as it answers; ``lost`` gets the host."""

    def __init__(self, client, method: str, lost: list[str]):
        self.client, self.method, self.lost = client, method, lost

    def __getattr__(self, name):
        return self._once if name == self.method else getattr(self.client, name)

    def _once(self, *args, **kwargs):
        answer = getattr(self.client, self.method)(*args, **kwargs)
        if self.lost:
            return answer
        self.lost.append(self.client.host)
        raise TransportError("Empty reply from server")
