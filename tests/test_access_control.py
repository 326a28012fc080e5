"""Authentication strategies, legacy and secure-RBAC policy defaults, policy files, CORS, and the
refusal to expose the development mode beyond loopback."""

import pytest
import yaml
from apihelpers import SERVICE_HEADERS, Api, error_code, error_detail, new_uuid, reshape_new_provider

from berth.api.app import PlacementApp, Settings
from berth.api.policy import ADMIN_ONLY, OPERATIONS
from berth.api.wsgi import create_app, settings_from_environment
from berth.cli.main import main as berth_main

TOKENS = {
    "admin-token": {"user_id": "ops", "project_id": "admin", "roles": ["admin"]},
    "service-token": {"user_id": "nova", "project_id": "service", "roles": ["service"]},
    "system-admin": {"user_id": "root", "project_id": "admin", "roles": ["admin"], "system_scope": "all"},
    "reader-token": {"user_id": "auditor", "project_id": "admin", "roles": ["reader"]},
    "project-reader": {"user_id": "alice", "project_id": "tenant-a", "roles": ["reader"]},
    "member-token": {"user_id": "bob", "project_id": "tenant-a", "roles": ["member"]},
}


@pytest.fixture
def tokens_file(tmp_path):
    path = tmp_path / "tokens.yaml"
    path.write_text(yaml.safe_dump({"tokens": TOKENS}))
    return str(path)


def _api(db, **settings):
    return Api(PlacementApp(db, Settings(**settings)))


def _concrete(path):
    return (
        path.replace("{uuid}", new_uuid())
        .replace("{consumer_uuid}", new_uuid())
        .replace("{resource_class}", "VCPU")
        .replace("{name}", "CUSTOM_X")
        .replace("{project_id}", "tenant-a")
    )


WRITES = [op for op in OPERATIONS if not op.reads]
READS = [op for op in OPERATIONS if op.reads]


def _call(api, op, token, headers=None):
    path = _concrete(op.path)
    if op.name == "placement:usages":
        path += "?project_id=tenant-a"
    return api.request(
        op.method, path, raw=b"{}" if op.method in ("PUT", "POST") else None, token=token, headers=headers
    )


def test_a_plain_admin_may_not_reshape_under_the_default_rules(db):
    # As Placement under oslo.policy's default enforce_new_defaults: reshaping is the service's.
    api = _api(db)
    r = reshape_new_provider(api)
    assert r.status_code == 403
    assert error_code(r) == "placement.undefined_code"
    assert error_detail(r).endswith("Policy does not allow placement:reshaper:reshape to be performed.  ")
    # A service user, with or without the admin role beside it, may.
    assert reshape_new_provider(api, headers=SERVICE_HEADERS).status_code == 204
    assert reshape_new_provider(api, token="nova:service", headers={"X-Roles": "service"}).status_code == 204


def test_the_legacy_rules_let_a_plain_admin_reshape(db):
    assert reshape_new_provider(_api(db, enforce_new_defaults=False)).status_code == 204


@pytest.mark.parametrize(("value", "status"), [(None, 403), ("false", 204), ("0", 204), ("true", 403)])
def test_the_wsgi_entry_point_reads_the_rules_from_the_environment(db, monkeypatch, value, status):
    if value is None:
        monkeypatch.delenv("BERTH_ENFORCE_NEW_DEFAULTS", raising=False)
    else:
        monkeypatch.setenv("BERTH_ENFORCE_NEW_DEFAULTS", value)
    api = Api(create_app(db.engine.url.render_as_string(hide_password=False)))
    assert reshape_new_provider(api).status_code == status


def test_the_wsgi_entry_point_refuses_a_flag_it_cannot_read(monkeypatch):
    monkeypatch.setenv("BERTH_ENFORCE_NEW_DEFAULTS", "maybe")
    with pytest.raises(ValueError, match=r"\$BERTH_ENFORCE_NEW_DEFAULTS: expected true or false"):
        settings_from_environment()


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: op.name)
def test_legacy_defaults_allow_only_admin_and_service(db, op):
    api = _api(db, enforce_new_defaults=False)
    r = _call(api, op, "alice:tenant-b")
    assert r.status_code == 403 and error_detail(r).endswith(f"Policy does not allow {op.name} to be performed.  ")
    assert _call(api, op, "admin").status_code != 403
    service = _call(api, op, "nova:service", headers={"X-Roles": "service"}).status_code
    assert (service == 403) == (op.name in ADMIN_ONLY)


@pytest.mark.parametrize("op", WRITES, ids=lambda op: op.name)
def test_secure_rbac_readers_and_members_cannot_write(db, tokens_file, op):
    api = _api(db, auth_strategy="tokens", tokens_file=tokens_file, enforce_new_defaults=True)
    for token in ("reader-token", "project-reader", "member-token", "system-admin"):
        r = _call(api, op, token)
        assert r.status_code == 403, (token, r.status_code)
    assert (_call(api, op, "service-token").status_code == 403) == (op.name in ADMIN_ONLY)
    # Reshaping is the service's alone under the new defaults.
    assert (_call(api, op, "admin-token").status_code == 403) == (op.name == "placement:reshaper:reshape")


@pytest.mark.parametrize("op", READS, ids=lambda op: op.name)
def test_secure_rbac_reads_need_admin_or_service(db, tokens_file, op):
    api = _api(db, auth_strategy="tokens", tokens_file=tokens_file, enforce_new_defaults=True)
    assert _call(api, op, "admin-token").status_code != 403
    assert (_call(api, op, "service-token").status_code == 403) == (op.name in ADMIN_ONLY)
    assert _call(api, op, "system-admin").status_code == 403
    # A reader of tenant-a may read tenant-a's usages and nothing else.
    reader = _call(api, op, "project-reader").status_code
    assert (reader != 403) == (op.name == "placement:usages")


def test_project_reader_sees_only_its_own_usages(db, tokens_file):
    api = _api(db, auth_strategy="tokens", tokens_file=tokens_file, enforce_new_defaults=True)
    assert api.get("/usages?project_id=tenant-a", token="project-reader", version="1.9").status_code == 200
    assert api.get("/usages?project_id=tenant-b", token="project-reader", version="1.9").status_code == 403
    assert api.get("/resource_providers", token="project-reader").status_code == 403


def test_tokens_strategy_refuses_unknown_tokens(db, tokens_file):
    api = _api(db, auth_strategy="tokens", tokens_file=tokens_file)
    assert api.get("/resource_providers", token="admin").status_code == 401
    assert api.get("/resource_providers", token="admin-token").status_code == 200
    assert api.get("/", token="").status_code == 200


def test_policy_file_overrides_a_rule(db, tokens_file, tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text('"placement:resource_providers:list": "role:reader"\n')
    # A policy file can grant a reader what the defaults do not.
    api = _api(db, auth_strategy="tokens", tokens_file=tokens_file, policy_file=str(policy))
    assert api.get("/resource_providers", token="reader-token").status_code == 200
    assert api.get(f"/resource_providers/{new_uuid()}", token="reader-token").status_code == 403


def test_keystone_strategy_trusts_confirmed_identity_headers(db):
    api = _api(db, auth_strategy="keystone")
    assert api.get("/resource_providers", token="").status_code == 401
    headers = {"X-Identity-Status": "Confirmed", "X-User-Id": "u", "X-Project-Id": "p", "X-Roles": "admin"}
    assert api.get("/resource_providers", token="", headers=headers).status_code == 200


def test_cors_preflight_and_simple_requests(session_db):
    app = create_app(
        session_db.engine.url.render_as_string(hide_password=False),
        Settings(cors_allowed_origins=("https://dash.example",), cors_allow_headers=("X-Custom",)),
    )
    api = Api(app)
    r = api.request(
        "OPTIONS",
        "/resource_providers",
        token="",
        version="",
        headers={
            "Origin": "https://dash.example",
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "X-Auth-Token,X-Custom",
        },
    )
    assert r.status_code == 200
    assert r.headers["Access-Control-Allow-Origin"] == "https://dash.example"
    r = api.get("/", token="", headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in r.headers
    r = api.get("/", token="", headers={"Origin": "https://dash.example"})
    assert r.headers["Access-Control-Allow-Origin"] == "https://dash.example"


def test_noauth_on_a_public_address_is_refused_unless_forced(capsys):
    assert berth_main(["serve", "--bind", "0.0.0.0:8778"]) == 2
    assert "refusing" in capsys.readouterr().err


def test_serve_settings_come_from_a_configuration_file(tmp_path, capsys):
    config = tmp_path / "berth.yaml"
    config.write_text("bind: 0.0.0.0:8778\nauth_strategy: noauth2\n")
    # The file's public address is refused in the development mode, exactly as on the command line.
    assert berth_main(["serve", "--config", str(config)]) == 2
    assert "0.0.0.0" in capsys.readouterr().err
    config.write_text("no_such_setting: 1\n")
    with pytest.raises(SystemExit):
        berth_main(["serve", "--config", str(config)])
