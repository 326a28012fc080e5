"""The conductors' API under the keystone strategy: keystonemiddleware's auth_token stands in front
of it, as in front of the service, so that identity headers a caller sends itself are not taken for
an identity Keystone confirmed."""

from __future__ import annotations

import pytest
from apihelpers import keystone_config
from werkzeug.test import Client

from berth.clients.placement import PlacementClient
from berth.conductor.api.app import ApiSettings, create_app
from berth.conductor.control.plane import ControlPlane

# What a caller could send on its own, without any token: the headers auth_token sets once it has
# validated one.
FORGED = {"X-Identity-Status": "Confirmed", "X-User-Id": "mallory", "X-Project-Id": "p", "X-Roles": "admin"}


@pytest.fixture
def plane(placement_service, tmp_path):
    made = ControlPlane(f"sqlite:///{tmp_path / 'conductor.sqlite'}", PlacementClient(placement_service.url))
    yield made
    made.close()


def test_identity_headers_without_a_token_are_refused(plane, tmp_path, monkeypatch):
    monkeypatch.setenv("BERTH_KEYSTONE_CONFIG", keystone_config(tmp_path))
    web = Client(create_app(plane, ApiSettings(auth_strategy="keystone")))
    for method, path in [("GET", "/hosts"), ("GET", "/servers?all_projects=1"), ("DELETE", "/flavors/any")]:
        answer = web.open(path, method=method, headers=FORGED)
        assert answer.status_code == 401, (method, path, answer.get_data(as_text=True))
    # The public paths stay public.
    assert web.get("/").status_code == 200
