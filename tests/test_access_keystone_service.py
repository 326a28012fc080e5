"""The service under the keystone strategy (berth.api.wsgi.create_app): keystonemiddleware's
auth_token refuses identity headers sent without a token, and lets version discovery and the probes
through, as Placement answers GET / to a client that has no token yet."""

from __future__ import annotations

from apihelpers import keystone_config
from werkzeug.test import Client

from berth.api.settings import Settings
from berth.api.wsgi import create_app

FORGED = {"X-Identity-Status": "Confirmed", "X-User-Id": "mallory", "X-Project-Id": "p", "X-Roles": "admin"}


def test_the_service_refuses_forged_identity_and_answers_discovery(tmp_path, monkeypatch):
    monkeypatch.setenv("BERTH_KEYSTONE_CONFIG", keystone_config(tmp_path))
    web = Client(create_app(f"sqlite:///{tmp_path / 'berth.sqlite'}", Settings(auth_strategy="keystone")))
    for method, path in [("GET", "/resource_providers"), ("POST", "/resource_providers"), ("GET", "/berth/quotas")]:
        answer = web.open(path, method=method, headers=FORGED)
        assert answer.status_code == 401, (method, path, answer.get_data(as_text=True))
    discovery = web.get("/")
    assert discovery.status_code == 200 and discovery.get_json()["versions"][0]["max_version"]
    assert web.get("/healthz").status_code == 200
