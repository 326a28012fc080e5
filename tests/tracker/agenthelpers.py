"""``berth agent`` processes for the tests: started next to the session's ``berth serve``, driven over
HTTP through ``AgentClient`` as a conductor would, and checked against what Placement holds."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter

import requests
import yaml
from livehelpers import free_port
from trackerhelpers import TOPOLOGY

from berth.clients.agent import AgentClient

TOKEN = "conductor-secret"


class Agent:
    def __init__(self, placement_url, tmp_path, host=None, *, topology=TOPOLOGY, token=TOKEN, extra=(), config=None):
        self.host = host or f"agent-{uuid.uuid4().hex[:8]}"
        self.placement_url = placement_url
        self.state_dir = tmp_path / "state"
        self.config = tmp_path / f"{self.host}.yaml"
        self.config.write_text(
            yaml.safe_dump(
                {
                    "reserved": {"MEMORY_MB": 0},
                    "allocation_ratios": {"VCPU": 1.0},
                    "pci_device_spec": [{"vendor_id": "10de"}, {"vendor_id": "8086", "product_id": "1572"}],
                    "fake": topology,
                    "audit": {"interval": 2.0},
                    **(config or {}),
                }
            )
        )
        self.token = token
        self.extra = list(extra)
        self.start()

    def start(self):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [
            sys.executable,
            "-m",
            "berth.cli.main",
            "agent",
            "--host",
            self.host,
            "--placement",
            self.placement_url,
            "--driver",
            "fake",
            "--config",
            str(self.config),
            "--bind",
            f"127.0.0.1:{self.port}",
            "--state-dir",
            str(self.state_dir),
            *self.extra,
        ]
        if self.token:
            command += ["--token", self.token]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("berth agent exited:\n" + self.process.stdout.read().decode())
            try:
                if requests.get(self.url + "/", timeout=2).json().get("root_provider_uuid"):
                    break
            except requests.RequestException:
                pass
            time.sleep(0.1)
        else:
            self.stop()
            raise RuntimeError("berth agent did not answer within 60 s")
        self.client = AgentClient(self.url, token=self.token)
        return self

    def stop(self, sig=signal.SIGTERM) -> str:
        if self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            self.process.wait(timeout=20)
        return self.process.stdout.read().decode()


@contextlib.contextmanager
def started_agents(placement_url, tmp_path_factory, hosts):
    """One ``berth agent`` per host, each in a folder of its own: ``hosts`` maps a host name to the
    keyword arguments of ``Agent`` (``topology``, ``config``, ...). Yields host name -> Agent; at the
    end every agent is stopped (those a test stopped already included), and none may have logged a
    traceback."""
    agents = {}
    try:
        for name, options in hosts.items():
            agents[name] = Agent(placement_url, tmp_path_factory.mktemp(name), name, **options)
        yield agents
    finally:
        logs = {name: agent.stop() for name, agent in agents.items()}
        for name, log in logs.items():
            assert "Traceback" not in log, f"{name}: {log}"


@contextlib.contextmanager
def two_agents(placement_url, folder):
    """Two ``berth agent`` processes of generated host names sharing ``folder``; stopped at the end,
    and neither may have logged a traceback."""
    pair = [Agent(placement_url, folder), Agent(placement_url, folder)]
    try:
        yield pair
    finally:
        for agent in pair:
            log = agent.stop()
            assert "Traceback" not in log, log


def assert_remote_books_agree(placement, *clients):
    """What each agent says (claims, capacity, audit) matches what Placement holds."""
    for client in clients:
        claims = client.claims_for_host(client.host)
        capacity = client.capacity()
        claimed = {}
        for claim in claims:
            for rp, resources in claim.allocations.items():
                claimed.setdefault(rp, Counter()).update(resources)
        for rp, provider in capacity["providers"].items():
            if not provider["inventories"]:
                continue
            used = {rc: v["used"] for rc, v in provider["inventories"].items() if v["used"]}
            assert used == dict(claimed.get(rp, {}))
            assert {rc: n for rc, n in placement.usages(rp).items() if n} == used
        for claim in claims:
            assert placement.consumer(claim.consumer_uuid).on(set(claim.allocations)) == claim.allocations
        report = client.audit(heal=False)
        assert report["consistent"], report["findings"]
