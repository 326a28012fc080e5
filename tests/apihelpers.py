"""A client of the WSGI application speaking Placement's conventions, and small helpers of the API
tests."""

from __future__ import annotations

import uuid

import orjson
from werkzeug.test import Client

# What a service caller sends in the noauth2 development mode: a real cloud's service user (Nova's)
# has the admin and service roles, and the service role is what reshaping needs under the defaults.
SERVICE_HEADERS = {"X-Roles": "admin,service"}


class Api:
    """A client speaking to the WSGI app with Placement's conventions; ``headers`` go with every
    request (e.g. ``SERVICE_HEADERS``)."""

    def __init__(self, app, version="latest", token="admin", headers=None):
        self.client = Client(app)
        self.version = version
        self.token = token
        self.headers = dict(headers or {})

    def request(
        self,
        method,
        path,
        body=None,
        *,
        version=None,
        headers=None,
        token=None,
        raw=None,
        content_type="application/json",
    ):
        all_headers = dict(self.headers)
        version = self.version if version is None else version
        if version:
            all_headers["OpenStack-API-Version"] = f"placement {version}"
        token = self.token if token is None else token
        if token:
            all_headers["X-Auth-Token"] = token
        data = raw
        if body is not None:
            data = orjson.dumps(body)
        if data is not None and content_type:
            all_headers["Content-Type"] = content_type
        all_headers.update(headers or {})
        response = self.client.open(path, method=method, data=data, headers=all_headers)
        response.json_body = (
            orjson.loads(response.data) if response.data and response.mimetype == "application/json" else None
        )
        return response

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def put(self, path, body=None, **kw):
        return self.request("PUT", path, body, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    # -- shortcuts for building fixtures through the API itself --

    def create_provider(self, name=None, *, uuid_=None, parent=None, inventory=None, traits=None, aggregates=None):
        uuid_ = uuid_ or str(uuid.uuid4())
        body = {"name": name or f"rp-{uuid_[:8]}", "uuid": uuid_}
        if parent:
            body["parent_provider_uuid"] = parent
        r = self.post("/resource_providers", body, version="1.20")
        assert r.status_code == 200, r.data
        if inventory:
            self.set_inventory(uuid_, inventory)
        if traits:
            for t in traits:
                if t.startswith("CUSTOM_"):
                    self.put(f"/traits/{t}")
            gen = self.get(f"/resource_providers/{uuid_}").json_body["generation"]
            r = self.put(f"/resource_providers/{uuid_}/traits", {"traits": traits, "resource_provider_generation": gen})
            assert r.status_code == 200, r.data
        if aggregates:
            gen = self.get(f"/resource_providers/{uuid_}").json_body["generation"]
            r = self.put(
                f"/resource_providers/{uuid_}/aggregates",
                {"aggregates": aggregates, "resource_provider_generation": gen},
            )
            assert r.status_code == 200, r.data
        return uuid_

    def set_inventory(self, uuid_, inventory):
        gen = self.get(f"/resource_providers/{uuid_}").json_body["generation"]
        body = {
            "resource_provider_generation": gen,
            "inventories": {rc: (v if isinstance(v, dict) else {"total": v}) for rc, v in inventory.items()},
        }
        r = self.put(f"/resource_providers/{uuid_}/inventories", body)
        assert r.status_code == 200, r.data
        return r.json_body

    def allocate(
        self,
        consumer,
        allocations,
        *,
        project="proj",
        user="user",
        generation=None,
        consumer_type="INSTANCE",
        expect=204,
    ):
        body = {
            "allocations": {rp: {"resources": res} for rp, res in allocations.items()},
            "project_id": project,
            "user_id": user,
            "consumer_generation": generation,
            "consumer_type": consumer_type,
        }
        r = self.put(f"/allocations/{consumer}", body)
        assert r.status_code == expect, r.data
        return r


def new_uuid():
    return str(uuid.uuid4())


def error_code(response):
    return response.json_body["errors"][0].get("code")


def error_detail(response):
    return response.json_body["errors"][0]["detail"]


def reshape_new_provider(api, **kw):
    """POST /reshaper giving a new provider (made by ``api``'s own caller) its inventory; the answer.
    ``kw`` goes with the reshape alone (``token``, ``headers``)."""
    provider = api.create_provider()
    body = {
        "inventories": {provider: {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}}},
        "allocations": {},
    }
    return api.post("/reshaper", body, **kw)


def keystone_config(folder) -> str:
    """An auth_token configuration (the [keystone_authtoken] INI file ``BERTH_KEYSTONE_CONFIG`` names)
    for a Keystone nobody answers at: a request without a token is refused before it would be asked."""
    path = folder / "keystone.ini"
    path.write_text(
        "[keystone_authtoken]\n"
        "www_authenticate_uri = http://127.0.0.1:9/identity\n"
        "auth_url = http://127.0.0.1:9/identity\n"
        "auth_type = password\n"
        "username = berth\n"
        "password = secret\n"
        "project_name = service\n"
    )
    return str(path)
