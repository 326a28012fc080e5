"""GET /healthz and GET /readyz: answered without a token or a rule; ready only on a database that
answers with the newest schema."""

from __future__ import annotations

from alembic import command
from apihelpers import Api, error_detail

from berth.api.app import PlacementApp, Settings
from berth.store.database import Database
from berth.store.migrate import alembic_config
from berth.store.observability.readiness import newest_revisions


def test_healthz_answers_without_a_token(api):
    r = api.get("/healthz", token="", version="")
    assert r.status_code == 200 and r.json_body == {"status": "ok"}


def test_readyz_answers_without_a_token_on_an_upgraded_database(api):
    r = api.get("/readyz", token="", version="")
    assert r.status_code == 200 and r.json_body == {"status": "ready"}


def test_probes_need_no_rule_under_any_strategy(db, tmp_path):
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("tokens: {}\n")
    api = Api(PlacementApp(db, Settings(auth_strategy="tokens", tokens_file=str(tokens))))
    assert api.get("/healthz", token="").status_code == 200
    assert api.get("/readyz", token="").status_code == 200
    assert api.get("/resource_providers", token="").status_code == 401


def test_readyz_is_503_on_a_schema_behind_the_newest(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'behind.sqlite'}")
    with db.engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0004")
    try:
        api = Api(PlacementApp(db))
        r = api.get("/readyz", token="", version="")
        assert r.status_code == 503
        (newest,) = newest_revisions()
        assert "schema is at revision 0004" in error_detail(r) and newest in error_detail(r)
        assert api.get("/healthz", token="").status_code == 200
    finally:
        db.dispose()


def test_readyz_is_503_on_an_empty_database(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'empty.sqlite'}")
    try:
        r = Api(PlacementApp(db)).get("/readyz", token="")
        assert r.status_code == 503 and "revision none" in error_detail(r)
    finally:
        db.dispose()


def test_readyz_is_503_when_the_database_does_not_answer(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'no' / 'such' / 'folder.sqlite'}")
    try:
        r = Api(PlacementApp(db)).get("/readyz", token="")
        assert r.status_code == 503 and "the database does not answer" in error_detail(r)
    finally:
        db.dispose()
