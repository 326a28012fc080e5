"""The usage counters of projects with limits (``quota_usage``, kept by the triggers of migration
0012): after any write through the API, on both databases, they equal the sums counted from the
allocations, and a refused claim leaves them as they were."""

from __future__ import annotations

import datetime
from collections import Counter, defaultdict

import pytest
import sqlalchemy as sa
from apihelpers import SERVICE_HEADERS, Api, error_code, error_detail, new_uuid
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from berth.domain import error_codes
from berth.store import schema
from berth.store.leases import ledger
from berth.store.pick.board.host_board import HostBoard
from berth.store.quotas import own_count
from berth.store.util import utcnow

PROJECTS = ["pa", "pb", "pc"]
USERS = ["ua", "ub"]
CONSUMERS = 5


@pytest.fixture
def api(app, db):
    with db.engine.begin() as conn:
        conn.execute(schema.allocation_leases.delete())
    app.host_board = HostBoard(min_age=0.0)
    return Api(app, headers=SERVICE_HEADERS)


def counters(db):
    """Every counter that is not zero: (project, user or '' for the project's own, class or
    'consumers') -> amount."""
    query = """
SELECT p.external_id, COALESCE(u.external_id, ''), COALESCE(rc.name, 'consumers'), q.used
FROM quota_usage q
JOIN projects p ON p.id = q.project_pk
LEFT JOIN users u ON u.id = q.user_pk
LEFT JOIN resource_classes rc ON rc.id = q.resource_class_id
WHERE q.used <> 0"""
    with db.engine.connect() as conn:
        return {(p, u, rc): used for p, u, rc, used in conn.execute(sa.text(query))}


def summed(db):
    """The same, summed from the allocations, for the projects that have limits (and only those)."""
    query = """
SELECT p.external_id, u.external_id, c.uuid, rc.name, a.used
FROM consumers c
JOIN projects p ON p.id = c.project_id
JOIN users u ON u.id = c.user_id
JOIN quota_projects qp ON qp.project_id = p.external_id
JOIN allocations a ON a.consumer_id = c.uuid
JOIN resource_classes rc ON rc.id = a.resource_class_id"""
    found: dict[tuple[str, str, str], int] = defaultdict(int)
    holders: dict[tuple[str, str], set[str]] = defaultdict(set)
    with db.engine.connect() as conn:
        for project, user, consumer, rc, used in conn.execute(sa.text(query)):
            for scope in ("", user):
                found[(project, scope, rc)] += used
                holders[(project, scope)].add(consumer)
    for (project, scope), consumers in holders.items():
        found[(project, scope, "consumers")] = len(consumers)
    return {key: used for key, used in found.items() if used}


def assert_counted_right(db):
    assert counters(db) == summed(db)
    with db.engine.connect() as conn:
        counted = set(
            conn.execute(
                sa.text("SELECT p.external_id FROM quota_counted_projects q JOIN projects p ON p.id = q.project_pk")
            ).scalars()
        )
        limited = set(conn.execute(sa.text("SELECT project_id FROM quota_projects")).scalars())
    assert counted == limited


# --- random writes --------------------------------------------------------------------------------

projects = st.sampled_from(PROJECTS)
users = st.sampled_from(USERS)
consumers = st.integers(0, CONSUMERS - 1)
amounts = st.integers(0, 3)

operations = st.one_of(
    st.tuples(st.just("put"), consumers, projects, users, amounts, amounts),
    st.tuples(st.just("post"), st.lists(st.tuples(consumers, projects, users, amounts), min_size=1, max_size=3)),
    st.tuples(st.just("delete"), consumers),
    # The last: whether the process believes the project counted (``own_count``), either way right.
    st.tuples(st.just("pick"), consumers, projects, users, st.integers(1, 3), st.booleans()),
    st.tuples(st.just("gang"), projects, users, st.integers(1, 3)),
    st.tuples(st.just("limit"), projects, st.none() | st.integers(0, 12)),
    st.tuples(st.just("user_limit"), projects, users, st.none() | st.integers(0, 6)),
)


class Writer:
    """Applies the random operations through the API, to consumers of its own."""

    def __init__(self, api, hosts, db):
        self.api = api
        self.db = db
        self.hosts = hosts
        self.consumers = [new_uuid() for _ in range(CONSUMERS)]

    def generation(self, consumer):
        return self.api.get(f"/allocations/{consumer}").json_body.get("consumer_generation")

    def body(self, consumer, project, user, vcpu, memory=0, host=0):
        resources = {name: amount for name, amount in (("VCPU", vcpu), ("MEMORY_MB", 256 * memory)) if amount}
        return {
            "allocations": {self.hosts[host]: {"resources": resources}} if resources else {},
            "project_id": project,
            "user_id": user,
            "consumer_generation": self.generation(consumer),
            "consumer_type": "INSTANCE",
        }

    def apply(self, operation):
        kind, *args = operation
        getattr(self, kind)(*args)

    def put(self, index, project, user, vcpu, memory):
        consumer = self.consumers[index]
        r = self.api.put(f"/allocations/{consumer}", self.body(consumer, project, user, vcpu, memory, index % 2))
        assert r.status_code in (204, 409), r.data

    def post(self, writes):
        body = {}
        for index, project, user, vcpu in writes:
            consumer = self.consumers[index]
            body[consumer] = self.body(consumer, project, user, vcpu, host=index % 2)
        r = self.api.post("/allocations", body)
        assert r.status_code in (204, 400, 409), r.data

    def delete(self, index):
        assert self.api.delete(f"/allocations/{self.consumers[index]}").status_code in (204, 404)

    def pick(self, index, project, user, vcpu, believed_counted):
        consumer = self.consumers[index]
        if self.generation(consumer) is not None:
            return  # the pick places new consumers only
        own_count.remember(self.db.engine, project, believed_counted)
        body = {
            "query": {"resources": f"VCPU:{vcpu}"},
            "consumer": {"uuid": consumer, "project_id": project, "user_id": user, "consumer_type": "INSTANCE"},
        }
        assert self.api.post("/berth/pick", body).status_code in (200, 409)

    def gang(self, project, user, count):
        members = [
            {"uuid": new_uuid(), "project_id": project, "user_id": user, "consumer_type": "INSTANCE"}
            for _ in range(count)
        ]
        body = {"query": {"resources": "VCPU:1"}, "consumers": members}
        assert self.api.post("/berth/pick", body).status_code in (200, 409)

    def limit(self, project, value):
        if value is None:
            assert self.api.delete(f"/berth/quotas/{project}").status_code in (204, 404)
        else:
            limits = {"VCPU": value, "consumers": value // 2}
            assert self.api.put(f"/berth/quotas/{project}", {"limits": limits}).status_code == 200

    def user_limit(self, project, user, value):
        path = f"/berth/quotas/{project}/users/{user}"
        if value is None:
            assert self.api.delete(path).status_code in (204, 404)
        else:
            assert self.api.put(path, {"limits": {"MEMORY_MB": 256 * value}}).status_code == 200


@pytest.fixture
def hosts(api):
    return [api.create_provider(f"host-{i}", inventory={"VCPU": 10_000, "MEMORY_MB": 1_000_000}) for i in range(2)]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=st.lists(operations, min_size=1, max_size=12))
def test_the_counters_equal_the_sums_after_every_write(api, db, hosts, writes):
    writer = Writer(api, hosts, db)
    for operation in writes:
        writer.apply(operation)
        assert_counted_right(db)


# --- the writes the random ones do not reach --------------------------------------------------------


def test_a_consumer_moving_between_projects_and_users_moves_its_usage(api, db, hosts):
    for project in ("pa", "pb"):
        assert api.put(f"/berth/quotas/{project}", {"limits": {"VCPU": 100}}).status_code == 200
    writer = Writer(api, hosts, db)
    writer.put(0, "pa", "ua", 3, 1)
    writer.put(0, "pb", "ub", 3, 1)
    writer.put(0, "pz", "ub", 2, 0)  # into a project without limits: out of the counters
    writer.put(0, "pa", "ua", 1, 0)
    assert counters(db) == {
        ("pa", "", "VCPU"): 1,
        ("pa", "", "consumers"): 1,
        ("pa", "ua", "VCPU"): 1,
        ("pa", "ua", "consumers"): 1,
    }
    assert_counted_right(db)


def test_a_resize_holding_both_flavors_counts_both(api, db, hosts):
    api.put("/berth/quotas/pa", {"limits": {"VCPU": 100}})
    writer = Writer(api, hosts, db)
    instance, migration = writer.consumers[0], writer.consumers[1]
    writer.put(0, "pa", "ua", 2, 0)
    # Nova's resize: the migration consumer takes the source's allocations, the instance the target's.
    body = {
        migration: {**writer.body(migration, "pa", "ua", 2, host=0), "consumer_type": "MIGRATION"},
        instance: writer.body(instance, "pa", "ua", 4, host=1),
    }
    assert api.post("/allocations", body).status_code == 204
    assert api.get("/berth/quotas/pa").json_body["usage"] == {"VCPU": 6, "consumers": 2}
    writer.delete(1)  # confirmed: the source's allocations dropped
    assert api.get("/berth/quotas/pa").json_body["usage"] == {"VCPU": 4, "consumers": 1}
    assert_counted_right(db)


def test_the_reshaper_moves_usage_with_the_allocations(api, db):
    api.put("/berth/quotas/p", {"limits": {"VGPU": 10}})
    root = api.create_provider("cn", inventory={"VCPU": 8, "VGPU": 4})
    consumer = new_uuid()
    api.allocate(consumer, {root: {"VCPU": 2, "VGPU": 1}}, project="p", user="u")
    child = api.create_provider("gpu0", parent=root)

    def generation(provider):
        return api.get(f"/resource_providers/{provider}").json_body["generation"]

    body = {
        "inventories": {
            root: {"resource_provider_generation": generation(root), "inventories": {"VCPU": {"total": 8}}},
            child: {"resource_provider_generation": generation(child), "inventories": {"VGPU": {"total": 4}}},
        },
        "allocations": {
            consumer: {
                "allocations": {root: {"resources": {"VCPU": 2}}, child: {"resources": {"VGPU": 2}}},
                "project_id": "p",
                "user_id": "u",
                "consumer_generation": 1,
                "consumer_type": "INSTANCE",
            }
        },
    }
    assert api.post("/reshaper", body).status_code == 204
    assert api.get("/berth/quotas/p").json_body["usage"] == {"VCPU": 2, "VGPU": 2, "consumers": 1}
    assert_counted_right(db)


def test_preemption_and_lease_expiry_take_their_consumers_off_the_counters(api, db):
    host = api.create_provider("host", inventory={"VCPU": 4})
    for project in ("low", "high"):
        api.put(f"/berth/quotas/{project}", {"limits": {"VCPU": 100}})

    def pick(project, vcpus, **extra):
        body = {
            "query": {"resources": f"VCPU:{vcpus}"},
            "consumer": {"uuid": new_uuid(), "project_id": project, "user_id": "u", "consumer_type": "INSTANCE"},
            **extra,
        }
        r = api.post("/berth/pick", body)
        assert r.status_code == 200, r.data
        return body["consumer"]["uuid"]

    leased = pick("low", 1)
    pick("low", 3)
    assert api.get("/berth/quotas/low").json_body["usage"] == {"VCPU": 4, "consumers": 2}
    answer = api.post(
        "/berth/pick",
        {
            "query": {"resources": "VCPU:3"},
            "consumer": {"uuid": new_uuid(), "project_id": "high", "user_id": "u", "consumer_type": "INSTANCE"},
            "priority": 10,
            "preempt": True,
        },
    )
    assert answer.status_code == 200 and len(answer.json_body["preempted"]) == 1, answer.data
    assert api.get("/berth/quotas/low").json_body["usage"] == {"VCPU": 1, "consumers": 1}
    assert api.get("/berth/quotas/high").json_body["usage"] == {"VCPU": 3, "consumers": 1}
    assert_counted_right(db)
    # The lease of the one left runs out and the reaper releases it.
    assert api.put(f"/berth/leases/{leased}", {"expires_in": 60}).status_code == 200
    later = utcnow() + datetime.timedelta(seconds=120)
    assert db.write(lambda conn: ledger.reap_expired(conn, later)) == [leased]
    assert api.get("/berth/quotas/low").json_body["usage"] == {"VCPU": 0, "consumers": 0}
    assert_counted_right(db)
    assert host


def test_a_refused_claim_leaves_the_counters_as_they_were(app, db, hosts):
    from berth.api.app import PlacementApp, Settings

    api = Api(app)
    enforcing = Api(PlacementApp(db, Settings(enforce_quotas_on_allocations=True)))
    api.put("/berth/quotas/pa", {"limits": {"VCPU": 4, "consumers": 3}})
    api.allocate(new_uuid(), {hosts[0]: {"VCPU": 3}}, project="pa", user="ua")
    before = counters(db)
    pick = {
        "query": {"resources": "VCPU:2"},
        "consumer": {"uuid": new_uuid(), "project_id": "pa", "user_id": "ua", "consumer_type": "INSTANCE"},
    }
    gang = {
        "query": {"resources": "VCPU:1"},
        "consumers": [
            {"uuid": new_uuid(), "project_id": "pa", "user_id": "ua", "consumer_type": "INSTANCE"} for _ in range(2)
        ],
    }
    refused = [
        api.post("/berth/pick", pick),
        api.post("/berth/pick", gang),
        enforcing.allocate(new_uuid(), {hosts[0]: {"VCPU": 2}}, project="pa", user="ua", expect=409),
    ]
    assert [error_code(r) for r in refused] == [error_codes.QUOTA_EXCEEDED] * 3
    assert (
        counters(db)
        == before
        == {
            ("pa", "", "VCPU"): 3,
            ("pa", "", "consumers"): 1,
            ("pa", "ua", "VCPU"): 3,
            ("pa", "ua", "consumers"): 1,
        }
    )
    assert Counter(k[0] for k in before) == {"pa": 4}


def test_projects_without_limits_have_no_counters_and_the_first_limit_starts_them_from_the_sums(api, db, hosts):
    writer = Writer(api, hosts, db)
    writer.put(0, "pa", "ua", 2, 1)
    writer.put(1, "pa", "ub", 1, 0)
    assert counters(db) == {}
    api.put("/berth/quotas/pa/users/ub", {"limits": {"VCPU": 5}})
    assert counters(db)[("pa", "", "VCPU")] == 3
    assert_counted_right(db)
    api.delete("/berth/quotas/pa/users/ub")
    assert counters(db) == {}
    assert_counted_right(db)


def pick_believing(api, db, project, vcpu, believed_counted):
    """A pick of ``vcpu`` for user ua of ``project``, the process believing the project counted or
    not (``own_count``) as it picks."""
    own_count.remember(db.engine, project, believed_counted)
    body = {
        "query": {"resources": f"VCPU:{vcpu}"},
        "consumer": {"uuid": new_uuid(), "project_id": project, "user_id": "ua", "consumer_type": "INSTANCE"},
    }
    return api.post("/berth/pick", body)


@pytest.mark.parametrize("believed_counted", [False, True])
def test_a_pick_is_counted_and_checked_alike_whichever_way_its_project_is_believed_counted(
    api, db, hosts, believed_counted
):
    """A pick counts its consumer itself, or leaves it to the triggers, by what the process last
    found of its project (on PostgreSQL): a belief that is wrong either way changes nothing."""
    api.put("/berth/quotas/pa", {"limits": {"VCPU": 3, "consumers": 5}})

    def pick(project, vcpu):
        return pick_believing(api, db, project, vcpu, believed_counted)

    assert pick("pa", 1).status_code == 200
    assert pick("pa", 1).status_code == 200
    assert pick("pb", 2).status_code == 200
    before = counters(db)
    refused = pick("pa", 2)
    assert refused.status_code == 409 and error_code(refused) == error_codes.QUOTA_EXCEEDED
    assert "Quota exceeded for VCPU of project pa: limit 3, usage 2, asked 2." in error_detail(refused)
    assert (
        counters(db)
        == before
        == {
            ("pa", "", "VCPU"): 2,
            ("pa", "", "consumers"): 2,
            ("pa", "ua", "VCPU"): 2,
            ("pa", "ua", "consumers"): 2,
        }
    )
    assert pick("pa", 1).status_code == 200
    assert_counted_right(db)


@pytest.mark.parametrize("believed_counted", [False, True])
def test_a_pick_past_its_projects_and_its_users_limits_names_the_projects_either_way(api, db, hosts, believed_counted):
    api.put("/berth/quotas/pa", {"limits": {"VCPU": 2, "consumers": 1}})
    api.put("/berth/quotas/pa/users/ua", {"limits": {"VCPU": 2}})
    answers = [pick_believing(api, db, "pa", 2, believed_counted) for _ in range(2)]
    assert answers[0].status_code == 200
    assert answers[1].status_code == 409 and error_code(answers[1]) == error_codes.QUOTA_EXCEEDED
    # Four limits passed at once; the project's come first, by resource, as the check reads them.
    assert "Quota exceeded for VCPU of project pa: limit 2, usage 2, asked 2." in error_detail(answers[1])
    assert_counted_right(db)


@pytest.mark.parametrize("another_counted_by_writer", [False, True])
def test_allocations_written_before_their_consumers_row_are_counted_when_it_comes(
    api, db, hosts, another_counted_by_writer
):
    """As the import writes them. On PostgreSQL, also in a transaction that counts another
    consumer itself (``own_count``): the consumer triggers pass only that one by."""
    api.put("/berth/quotas/pa", {"limits": {"VCPU": 100}})
    Writer(api, hosts, db).put(0, "pa", "ua", 1, 0)  # the project's and the user's rows
    consumer, now = new_uuid(), utcnow()
    with db.engine.begin() as conn:
        if another_counted_by_writer and conn.dialect.name == "postgresql":
            conn.execute(sa.text(f"SELECT set_config('{own_count.SETTING}', :uuid, true)"), {"uuid": new_uuid()})

        def pk(table, column, value):
            return conn.execute(sa.select(table.c.id).where(column == value)).scalar_one()

        conn.execute(
            schema.allocations.insert().values(
                resource_provider_id=pk(schema.resource_providers, schema.resource_providers.c.uuid, hosts[0]),
                consumer_id=consumer,
                resource_class_id=pk(schema.resource_classes, schema.resource_classes.c.name, "VCPU"),
                used=3,
                created_at=now,
                updated_at=now,
            )
        )
        conn.execute(
            schema.consumers.insert().values(
                uuid=consumer,
                project_id=pk(schema.projects, schema.projects.c.external_id, "pa"),
                user_id=pk(schema.users, schema.users.c.external_id, "ua"),
                generation=0,
                created_at=now,
                updated_at=now,
            )
        )
    assert counters(db)[("pa", "", "VCPU")] == 4
    assert counters(db)[("pa", "ua", "consumers")] == 2
    assert_counted_right(db)
