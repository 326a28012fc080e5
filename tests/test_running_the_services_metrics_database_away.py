"""``GET /metrics`` while the database does not answer: the scrape still answers what was counted
(the requests, the 503s of the outage among them), without the cloud's figures, which come back
with the database. It used to answer 503 whole, so that Prometheus lost every request counter for
as long as the database was away, and the 503s the clients got with it.

A real ``berth serve`` on a PostgreSQL server of the test's own, stopped and started again."""

from __future__ import annotations

import pytest
import requests
from livehelpers import LiveServer
from prometheus_client.parser import text_string_to_metric_families

from berth.testbed.services.postgres import start_postgres

pytestmark = pytest.mark.slow


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _requests(samples, route: str, status: str) -> float:
    return samples.get(("berth_http_requests_total", (("method", "GET"), ("route", route), ("status", status))), 0.0)


def test_a_scrape_while_the_database_is_away_answers_the_counters():
    postgres = start_postgres()
    try:
        live = LiveServer(postgres.create_database("metrics_away"), workers=1, extra=["--metrics", "open"])
        try:
            up = requests.get(f"{live.url}/metrics", timeout=30)
            assert up.status_code == 200
            assert ("berth_providers", ()) in _samples(up.text)

            stopped = postgres._run("pg_ctl", "-D", postgres.datadir, "-m", "fast", "-w", "stop")
            assert stopped.returncode == 0, stopped.stderr
            listed = requests.get(f"{live.url}/resource_providers", headers={"X-Auth-Token": "admin"}, timeout=30)
            assert listed.status_code == 503

            away = requests.get(f"{live.url}/metrics", timeout=30)
            assert away.status_code == 200, away.text
            samples = _samples(away.text)
            assert _requests(samples, "/resource_providers", "503") == 1.0
            assert _requests(samples, "/metrics", "200") == 1.0
            assert ("berth_providers", ()) not in samples

            postgres._start_server(tries=10, pause=0.5, fresh_port=False)
            postgres._wait_accepting()
            back = _samples(requests.get(f"{live.url}/metrics", timeout=30).text)
            assert back[("berth_providers", ())] == 0.0
            assert _requests(back, "/metrics", "200") == 2.0
        finally:
            log = live.stop()
        assert "the cloud's figures are left out of this scrape" in log
    finally:
        postgres.stop()
