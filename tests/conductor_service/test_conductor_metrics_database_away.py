"""The conductors' ``GET /metrics`` while their database does not answer: the scrape still answers
the requests counted (the 503s of the outage among them), without the journal's operations, which
come back with the database. It used to answer 503 whole, so that Prometheus lost every counter of
the conductors for as long as their database was away.

A real ``berth serve`` (SQLite) and a real ``berth conductor`` on a PostgreSQL server of the test's
own, stopped and started again."""

from __future__ import annotations

import pytest
import requests
from livehelpers import LiveServer
from prometheus_client.parser import text_string_to_metric_families

from berth.testbed.services.conductor import ConductorProcess
from berth.testbed.services.postgres import start_postgres

pytestmark = pytest.mark.slow

ADMIN = {"X-Auth-Token": "admin"}


def _families(text: str) -> dict[str, list]:
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def _requests(families, route: str, status: str) -> float:
    for sample in families.get("berth_http_requests", []):
        labels = sample.labels
        if sample.name.endswith("_total") and labels.get("route") == route and labels.get("status") == status:
            return sample.value
    return 0.0


def test_a_scrape_while_the_conductors_database_is_away_answers_the_counters(tmp_path):
    postgres = start_postgres()
    live = LiveServer(f"sqlite:///{tmp_path}/books.db", workers=1)
    conductor = ConductorProcess(live.url, postgres.create_database("conductor_metrics_away"), str(tmp_path))
    try:
        conductor.start()
        up = requests.get(f"{conductor.url}/metrics", headers=ADMIN, timeout=30)
        assert up.status_code == 200, up.text
        assert "berth_conductor_operations_running" in _families(up.text)

        stopped = postgres._run("pg_ctl", "-D", postgres.datadir, "-m", "fast", "-w", "stop")
        assert stopped.returncode == 0, stopped.stderr
        ready = requests.get(f"{conductor.url}/readyz", timeout=30)
        assert ready.status_code == 503, ready.text

        away = requests.get(f"{conductor.url}/metrics", headers=ADMIN, timeout=30)
        assert away.status_code == 200, away.text
        families = _families(away.text)
        assert _requests(families, "/readyz", "503") == 1.0
        assert _requests(families, "/metrics", "200") == 1.0
        assert "berth_conductor_operations_running" not in families

        postgres._start_server(tries=10, pause=0.5, fresh_port=False)
        postgres._wait_accepting()
        back = _families(requests.get(f"{conductor.url}/metrics", headers=ADMIN, timeout=30).text)
        assert "berth_conductor_operations_running" in back
        assert _requests(back, "/metrics", "200") == 2.0
    finally:
        conductor.stop()
        live.stop()
        postgres.stop()
    assert "the journal's operations are left out of this scrape" in conductor.log_text()
