"""Claim leases: the API, the store's reaping (alone and racing), and a live service releasing what
was never confirmed, also across a restart."""

from __future__ import annotations

import datetime
import threading
import time
import uuid

import pytest
from apihelpers import error_code, error_detail, new_uuid
from dbhelpers import BACKENDS, make_database
from livehelpers import LiveServer, free_port

from berth.clients.errors import LeaseExpired
from berth.clients.placement import PlacementClient
from berth.conductor.service import ServiceCalls
from berth.domain import error_codes
from berth.store import schema
from berth.store.database import Database
from berth.store.leases import ledger
from berth.store.leases.reaper import LeaseReaper
from berth.store.placement import allocations
from berth.store.util import utcnow
from berth.testbed.client import Client

RESOURCES = {"VCPU": 1, "MEMORY_MB": 256}


@pytest.fixture(autouse=True)
def _no_leases(request):
    # The session's databases are emptied of Placement's tables between tests, not of this one.
    if "db" in request.fixturenames:
        with request.getfixturevalue("db").engine.begin() as conn:
            conn.execute(schema.allocation_leases.delete())


@pytest.fixture
def host(api):
    return api.create_provider("host", inventory={"VCPU": 64, "MEMORY_MB": 65536})


def _used(api, provider):
    return api.get(f"/resource_providers/{provider}/usages").json_body["usages"]


def _held(api, consumer):
    return api.get(f"/allocations/{consumer}").json_body["allocations"]


def _later(seconds=1.0):
    return utcnow() + datetime.timedelta(seconds=seconds)


# ---- the API ---------------------------------------------------------------------------------------


def test_a_lease_is_created_shown_listed_and_extended(api):
    consumer = new_uuid()
    r = api.put(f"/berth/leases/{consumer}", {"expires_in": 60})
    assert r.status_code == 200, r.data
    lease = r.json_body
    assert lease["consumer_uuid"] == consumer and 59 <= lease["expires_in"] <= 60
    expires_at = datetime.datetime.fromisoformat(lease["expires_at"].rstrip("Z"))
    assert abs((expires_at - _later(60)).total_seconds()) < 5
    assert api.get(f"/berth/leases/{consumer}").json_body["expires_at"] == lease["expires_at"]
    assert [item["consumer_uuid"] for item in api.get("/berth/leases").json_body["leases"]] == [consumer]

    extended = api.put(f"/berth/leases/{consumer}", {"expires_in": 600}).json_body
    assert extended["expires_at"] > lease["expires_at"] and extended["created_at"] == lease["created_at"]
    # Idempotent: the same request again leaves one lease, expiring as last asked.
    again = api.put(f"/berth/leases/{consumer}", {"expires_in": 600.5}).json_body
    assert 600 <= again["expires_in"] <= 600.5
    assert len(api.get("/berth/leases").json_body["leases"]) == 1


def test_a_leased_allocation_is_an_ordinary_allocation(api, host):
    consumer = new_uuid()
    api.allocate(consumer, {host: RESOURCES})
    before = api.get(f"/allocations/{consumer}").json_body
    assert api.put(f"/berth/leases/{consumer}", {"expires_in": 60}).status_code == 200
    assert api.get(f"/allocations/{consumer}").json_body == before
    assert before["allocations"][host]["resources"] == RESOURCES and _used(api, host) == RESOURCES


def test_confirming_keeps_the_allocations_and_can_be_repeated(api, host):
    consumer = new_uuid()
    api.allocate(consumer, {host: RESOURCES})
    api.put(f"/berth/leases/{consumer}", {"expires_in": 60})
    assert api.post(f"/berth/leases/{consumer}/confirm").status_code == 204
    assert api.get(f"/berth/leases/{consumer}").status_code == 404
    assert api.post(f"/berth/leases/{consumer}/confirm").status_code == 204
    # A release after the confirmation finds no lease and leaves the confirmed allocations alone.
    assert api.delete(f"/berth/leases/{consumer}").status_code == 204
    assert _used(api, host) == RESOURCES


def test_releasing_frees_the_allocations_and_can_be_repeated(api, host):
    consumer, other = new_uuid(), new_uuid()
    api.allocate(consumer, {host: RESOURCES})
    api.allocate(other, {host: {"VCPU": 2}})
    api.put(f"/berth/leases/{consumer}", {"expires_in": 60})
    assert api.delete(f"/berth/leases/{consumer}").status_code == 204
    assert _held(api, consumer) == {}
    assert _used(api, host) == {"VCPU": 2, "MEMORY_MB": 0}
    assert api.get(f"/berth/leases/{consumer}").status_code == 404
    assert api.delete(f"/berth/leases/{consumer}").status_code == 204
    assert _used(api, host) == {"VCPU": 2, "MEMORY_MB": 0}


def test_confirming_what_was_released_says_so(api, host):
    consumer = new_uuid()
    api.allocate(consumer, {host: RESOURCES})
    api.put(f"/berth/leases/{consumer}", {"expires_in": 60})
    api.delete(f"/berth/leases/{consumer}")
    r = api.post(f"/berth/leases/{consumer}/confirm")
    assert r.status_code == 404 and "released" in error_detail(r)


def _expire(db, consumer):
    """The lease's moment moved into the past, as if its time had run out; no reaper has passed."""
    with db.engine.begin() as conn:
        conn.execute(
            schema.allocation_leases.update()
            .where(schema.allocation_leases.c.consumer_uuid == consumer)
            .values(expires_at=utcnow() - datetime.timedelta(seconds=1))
        )


def test_confirming_an_expired_lease_is_refused_and_releases_it(api, db, host):
    consumer, other = new_uuid(), new_uuid()
    api.allocate(consumer, {host: RESOURCES})
    api.allocate(other, {host: {"VCPU": 2}})
    api.put(f"/berth/leases/{consumer}", {"expires_in": 60})
    _expire(db, consumer)
    r = api.post(f"/berth/leases/{consumer}/confirm")
    assert r.status_code == 409, r.data
    assert error_code(r) == error_codes.LEASE_EXPIRED and "released" in error_detail(r)
    # Released as the reaper would have: the allocations and the lease are gone, nothing else.
    assert _held(api, consumer) == {}
    assert _used(api, host) == {"VCPU": 2, "MEMORY_MB": 0}
    assert api.get(f"/berth/leases/{consumer}").status_code == 404
    # Asked again, the release is done: nothing held, nothing to confirm.
    assert api.post(f"/berth/leases/{consumer}/confirm").status_code == 404


def test_extending_an_expired_lease_is_refused_and_releases_it(api, db, host):
    consumer = new_uuid()
    api.allocate(consumer, {host: RESOURCES})
    api.put(f"/berth/leases/{consumer}", {"expires_in": 60})
    _expire(db, consumer)
    r = api.put(f"/berth/leases/{consumer}", {"expires_in": 600})
    assert r.status_code == 409, r.data
    assert error_code(r) == error_codes.LEASE_EXPIRED
    assert _held(api, consumer) == {} and _used(api, host) == {"VCPU": 0, "MEMORY_MB": 0}
    assert api.get(f"/berth/leases/{consumer}").status_code == 404
    # The consumer starts again: a new lease, before new allocations.
    assert api.put(f"/berth/leases/{consumer}", {"expires_in": 600}).status_code == 200


def test_a_lease_of_no_time_is_expired_at_once(api, host):
    consumer = new_uuid()
    api.allocate(consumer, {host: RESOURCES})
    api.put(f"/berth/leases/{consumer}", {"expires_in": 0})
    r = api.post(f"/berth/leases/{consumer}/confirm")
    assert r.status_code == 409 and error_code(r) == error_codes.LEASE_EXPIRED
    assert _held(api, consumer) == {}


def test_a_lease_taken_before_the_allocations_covers_them(api, db, host):
    consumer = new_uuid()
    api.put(f"/berth/leases/{consumer}", {"expires_in": 0.2})
    assert _held(api, consumer) == {}
    api.allocate(consumer, {host: RESOURCES})
    assert db.write(lambda conn: ledger.reap_expired(conn, _later())) == [consumer]
    assert _held(api, consumer) == {} and _used(api, host) == {"VCPU": 0, "MEMORY_MB": 0}
    # The client crashed before claiming: its lease expires with nothing to release.
    lone = new_uuid()
    api.put(f"/berth/leases/{lone}", {"expires_in": 0})
    assert db.write(lambda conn: ledger.reap_expired(conn, _later())) == [lone]
    assert api.get("/berth/leases").json_body == {"leases": []}


def test_an_unknown_lease_is_not_found(api):
    consumer = new_uuid()
    r = api.get(f"/berth/leases/{consumer}")
    assert r.status_code == 404 and consumer in error_detail(r)
    assert api.post(f"/berth/leases/{consumer}/confirm").status_code == 404
    assert api.delete(f"/berth/leases/{consumer}").status_code == 204


@pytest.mark.parametrize(
    "body,detail",
    [
        ({}, "'expires_in' is a required property"),
        ({"expires_in": -1}, "less than the minimum of 0"),
        ({"expires_in": 86400.5}, "greater than the maximum of 86400"),
        ({"expires_in": "60"}, "'60' is not of type 'number'"),
        ({"expires_in": True}, "True is not of type 'number'"),
        ({"expires_in": None}, "None is not of type 'number'"),
        ({"expires_in": 60, "confirm": True}, "Additional properties are not allowed"),
        ([60], "is not of type 'object'"),
    ],
)
def test_a_bad_lease_body_is_refused(api, body, detail):
    r = api.put(f"/berth/leases/{new_uuid()}", body)
    assert r.status_code == 400 and detail in error_detail(r), r.data
    assert api.get("/berth/leases").json_body == {"leases": []}


def test_malformed_bodies_and_consumers_are_refused(api):
    consumer = new_uuid()
    r = api.put(f"/berth/leases/{consumer}", raw=b"{not json")
    assert r.status_code == 400 and "Malformed JSON" in error_detail(r)
    assert api.put(f"/berth/leases/{consumer}", raw=b'{"expires_in": 5}', content_type="text/plain").status_code == 415
    for method in ("GET", "PUT", "DELETE"):
        r = api.request(method, "/berth/leases/not-a-uuid", {"expires_in": 5} if method == "PUT" else None)
        assert r.status_code == 400 and "Malformed consumer_uuid: not-a-uuid" in error_detail(r), method
    assert api.post("/berth/leases/not-a-uuid/confirm").status_code == 400
    assert api.post("/berth/leases").status_code == 405


def test_leases_are_for_admin_and_service_only(api):
    consumer = new_uuid()
    assert api.put(f"/berth/leases/{consumer}", {"expires_in": 5}, token="alice:tenant").status_code == 403
    assert api.get("/berth/leases", token="alice:tenant").status_code == 403
    service = {"X-Roles": "service"}
    assert (
        api.put(f"/berth/leases/{consumer}", {"expires_in": 5}, token="nova:service", headers=service).status_code
        == 200
    )


def test_the_lease_routes_are_in_the_openapi_document(api):
    paths = api.get("/berth/openapi.json", token="", version="").json_body["paths"]
    lease = paths["/berth/leases/{consumer_uuid}"]
    assert set(lease) == {"get", "put", "delete"}
    schema_ = lease["put"]["requestBody"]["content"]["application/json"]["schema"]
    assert schema_["required"] == ["expires_in"]
    assert "204" in paths["/berth/leases/{consumer_uuid}/confirm"]["post"]["responses"]
    assert "get" in paths["/berth/leases"]


# ---- reaping ---------------------------------------------------------------------------------------


def _leased_consumers(api, db, provider, count, seconds):
    consumers = sorted(new_uuid() for _ in range(count))
    for consumer in consumers:
        api.allocate(consumer, {provider: {"VCPU": 1}})
        db.write(lambda conn, consumer=consumer: ledger.set_lease(conn, consumer, seconds))
    return consumers


def test_reaping_releases_exactly_the_expired_leases(api, db, host):
    expired = _leased_consumers(api, db, host, 3, 0)
    running = _leased_consumers(api, db, host, 2, 3600)
    confirmed = _leased_consumers(api, db, host, 1, 3600)
    db.write(lambda conn: ledger.confirm_lease(conn, confirmed[0]))
    assert db.write(lambda conn: ledger.reap_expired(conn, _later())) == expired
    assert _used(api, host)["VCPU"] == 3
    assert all(_held(api, consumer) == {} for consumer in expired)
    assert all(_held(api, consumer) for consumer in running + confirmed)
    assert [lease.consumer_uuid for lease in db.read(ledger.list_leases)] == running
    assert db.write(lambda conn: ledger.reap_expired(conn, _later())) == []


def test_reaping_in_batches_takes_the_longest_expired_first(api, db, host):
    first = _leased_consumers(api, db, host, 1, 0)
    time.sleep(0.01)
    then = _leased_consumers(api, db, host, 2, 0)
    assert db.write(lambda conn: ledger.reap_expired(conn, _later(), limit=1)) == first
    assert db.write(lambda conn: ledger.reap_expired(conn, _later(), limit=5)) == then


def test_set_lease_refuses_what_no_request_could_ask(db):
    for seconds in (-1, float("nan"), float("inf"), ledger.MAX_LEASE_SECONDS + 1):
        with pytest.raises(ledger.BadRequest):
            db.write(lambda conn, seconds=seconds: ledger.set_lease(conn, new_uuid(), seconds))


REAPERS = 4


@pytest.fixture
def workers_dbs(db):
    """One Database per reaper, as each server worker has its own pool (and, on SQLite, lock file
    descriptor)."""
    url = db.engine.url.render_as_string(hide_password=False)
    dbs = [Database(url) for _ in range(REAPERS)]
    yield dbs
    for each in dbs:
        each.dispose()


def test_concurrent_reapers_release_each_lease_once(api, db, host, workers_dbs):
    consumers = _leased_consumers(api, db, host, 40, 0)
    start = threading.Barrier(REAPERS)
    released: list[list[str]] = [[] for _ in range(REAPERS)]
    errors: list[BaseException] = []
    moment = _later()

    def reap(index):
        try:
            start.wait()
            while batch := workers_dbs[index].write(lambda conn: ledger.reap_expired(conn, moment, limit=3)):
                released[index] += batch
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread to fail it
            errors.append(error)

    threads = [threading.Thread(target=reap, args=(i,)) for i in range(REAPERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert sorted(c for batch in released for c in batch) == consumers
    assert _used(api, host) == {"VCPU": 0, "MEMORY_MB": 0}
    assert db.read(ledger.list_leases) == []


def test_the_reaper_thread_releases_what_expires(api, db, host):
    consumer, kept = new_uuid(), new_uuid()
    api.allocate(consumer, {host: RESOURCES})
    api.allocate(kept, {host: {"VCPU": 1}})
    api.put(f"/berth/leases/{consumer}", {"expires_in": 0.1})
    api.put(f"/berth/leases/{kept}", {"expires_in": 60})
    reaper = LeaseReaper(db, interval=0.05).start()
    try:
        _wait_for(lambda: _used(api, host) == {"VCPU": 1, "MEMORY_MB": 0}, 5.0)
    finally:
        reaper.stop(timeout=5)
    assert [lease["consumer_uuid"] for lease in api.get("/berth/leases").json_body["leases"]] == [kept]


def test_a_reaper_whose_database_is_away_says_so_in_a_line_and_goes_on(caplog):
    """A PostgreSQL restarting or failing over: one warning per pass, no traceback."""
    away = Database(f"postgresql+psycopg://berth@127.0.0.1:{free_port()}/berth")
    reaper = LeaseReaper(away, interval=0.05)
    try:
        with caplog.at_level("WARNING", logger="berth.store.leases.reaper"):
            reaper.start()
            _wait_for(lambda: any(r.name == "berth.store.leases.reaper" for r in caplog.records), 30.0)
            assert reaper._thread is not None and reaper._thread.is_alive()
    finally:
        reaper.stop(timeout=30)
        away.dispose()
    said = [r for r in caplog.records if r.name == "berth.store.leases.reaper"]
    assert said and all(r.levelname == "WARNING" and r.exc_info is None for r in said)
    assert "releasing expired leases failed" in said[0].getMessage()


def test_a_reaper_needs_a_positive_interval(db):
    with pytest.raises(ValueError, match="positive"):
        LeaseReaper(db, 0)


def _wait_for(condition, timeout):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not within the time allowed"
        time.sleep(0.05)


# ---- the running service ---------------------------------------------------------------------------

INTERVAL = 0.2


@pytest.fixture(params=BACKENDS)
def live_url(request, tmp_path_factory, monkeypatch):
    monkeypatch.setenv("BERTH_LEASE_CHECK_INTERVAL", str(INTERVAL))
    return make_database(request.param, tmp_path_factory, request)


def _usage(client, provider):
    return client.call("GET", f"/resource_providers/{provider}/usages")["usages"]


def _claim(client, provider, seconds):
    consumer = str(uuid.uuid4())
    client.call("PUT", f"/berth/leases/{consumer}", {"expires_in": seconds})
    client.call(
        "PUT",
        f"/allocations/{consumer}",
        {
            "allocations": {provider: {"resources": {"VCPU": 1}}},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        },
        expect=(204,),
    )
    return consumer


def _allocations_in_database(url, consumer):
    db = Database(url)
    try:
        return db.read(lambda conn: len(allocations.allocations_of_consumer(conn, consumer)))
    finally:
        db.dispose()


def test_the_service_releases_unconfirmed_claims_also_across_a_restart(live_url):
    live = LiveServer(live_url, workers=2)
    log = ""
    try:
        client = live.client()
        provider = str(uuid.uuid4())
        client.call("POST", "/resource_providers", {"name": "host", "uuid": provider})
        client.call(
            "PUT",
            f"/resource_providers/{provider}/inventories",
            {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}},
        )
        confirmed = _claim(client, provider, 10)
        client.call("POST", f"/berth/leases/{confirmed}/confirm", expect=(204,))
        _claim(client, provider, 0.5)
        assert _usage(client, provider) == {"VCPU": 2}
        _wait_for(lambda: _usage(client, provider) == {"VCPU": 1}, 20 * INTERVAL + 1)

        # Expiring while the service is down: released by the first passes after it is back.
        seconds = 2.0
        expires = time.monotonic() + seconds
        left_behind = _claim(client, provider, seconds)
        client.close()
        live.server.stop(grace=5.0)
        time.sleep(max(0.0, expires - time.monotonic()) + 0.3)
        assert _allocations_in_database(live_url, left_behind) == 1, "released before the service stopped"
        live.server.start()
        client = Client(live.server.url, version="latest")
        _wait_for(lambda: _usage(client, provider) == {"VCPU": 1}, 20 * INTERVAL + 1)
        assert client.call("GET", "/berth/leases") == {"leases": []}
        assert client.call("GET", f"/allocations/{confirmed}")["allocations"]
        client.close()
    finally:
        log = live.stop()
    assert "Traceback" not in log, log
    assert log.count("released the allocations of expired leases (1)") == 2, log


@pytest.fixture(params=BACKENDS)
def slow_reaper_url(request, tmp_path_factory, monkeypatch):
    # A reaper that will not pass during the test: what expires is found expired by the request.
    monkeypatch.setenv("BERTH_LEASE_CHECK_INTERVAL", "3600")
    return make_database(request.param, tmp_path_factory, request)


def _picked(client, seconds):
    consumer = str(uuid.uuid4())
    body = {
        "query": {"resources": "VCPU:1"},
        "consumer": {"uuid": consumer, "project_id": "p", "user_id": "u", "consumer_type": "INSTANCE"},
        "lease_seconds": seconds,
    }
    client.call("POST", "/berth/pick", body)
    return consumer


def test_a_late_confirmation_or_extension_is_refused_before_the_reaper_passes(slow_reaper_url):
    live = LiveServer(slow_reaper_url, workers=1)
    try:
        client = live.client()
        provider = str(uuid.uuid4())
        client.call("POST", "/resource_providers", {"name": "host", "uuid": provider})
        client.call(
            "PUT",
            f"/resource_providers/{provider}/inventories",
            {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}},
        )
        confirmed, extended, kept = _picked(client, 1), _picked(client, 1), _picked(client, 600)
        time.sleep(1.2)
        for consumer, method, path, body in (
            (confirmed, "POST", f"/berth/leases/{confirmed}/confirm", None),
            (extended, "PUT", f"/berth/leases/{extended}", {"expires_in": 600}),
        ):
            r = client.request(method, path, body)
            assert r.status_code == 409, r.content
            assert r.json()["errors"][0]["code"] == error_codes.LEASE_EXPIRED
            assert client.call("GET", f"/allocations/{consumer}")["allocations"] == {}
        assert [lease["consumer_uuid"] for lease in client.call("GET", "/berth/leases")["leases"]] == [kept]
        assert _usage(client, provider) == {"VCPU": 1}

        # The conductor's calls: a late confirmation raises LeaseExpired (the build is undone), and
        # a lease taken again before an alternate's claim starts anew.
        calls = ServiceCalls(PlacementClient(live.url))
        late = _picked(client, 1)
        time.sleep(1.2)
        with pytest.raises(LeaseExpired) as caught:
            calls.confirm_lease(late)
        assert caught.value.status == 409
        again = _picked(client, 1)
        time.sleep(1.2)
        calls.take_lease(again, 600)
        assert client.call("GET", f"/allocations/{again}")["allocations"] == {}
        assert client.call("GET", f"/berth/leases/{again}")["expires_in"] > 500
        calls.confirm_lease(kept)
        assert _usage(client, provider) == {"VCPU": 1}
        client.close()
    finally:
        log = live.stop()
    assert "Traceback" not in log, log
    assert "released the allocations of expired leases" not in log, log
