"""berth.portability: a snapshot of the books exported, imported into another database (of either
kind) and exported again is the same file, and the copy answers the Placement API as the source
does; an import is all or nothing, refuses a database with books unless merging, and a merge of what
is there already changes nothing."""

from __future__ import annotations

import datetime
import io
import re
import uuid

import orjson
import pytest
from apihelpers import Api, new_uuid
from dbhelpers import make_database
from sqlalchemy.exc import IntegrityError

from berth.api.app import PlacementApp
from berth.portability import BooksConflict, BooksFileError, TargetNotEmpty, export_books, import_books
from berth.portability.synthetic import write_snapshot
from berth.store.database import Database
from berth.store.held_books import holdings
from berth.store.migrate import upgrade

STAMP = datetime.datetime(2026, 5, 1, 12, 0, 0)
UNKNOWN = "00000000-0000-0000-0000-000000000000"
HOST = {"VCPU": 16, "MEMORY_MB": 32768, "DISK_GB": 500}


def _new_database(backend, tmp_path_factory, request):
    db = Database(make_database(backend, tmp_path_factory, request))
    upgrade(db)
    request.addfinalizer(db.dispose)
    return db


def _build_books(api):
    """A small cloud with every kind of record, including a provider moved under a newer parent
    (so that creation order and tree order differ) and a deleted provider (a gap in the ids)."""
    assert api.put("/resource_classes/CUSTOM_FPGA").status_code == 201
    agg, other_agg = new_uuid(), new_uuid()
    hosts = [
        api.create_provider(f"host-{n}", inventory=HOST, traits=["HW_CPU_X86_AVX2", "CUSTOM_FAST"], aggregates=[agg])
        for n in range(3)
    ]
    moved = api.create_provider("moved-fpga", inventory={"CUSTOM_FPGA": 2})
    gone = api.create_provider("gone")
    assert api.delete(f"/resource_providers/{gone}").status_code == 204
    numa = [api.create_provider(f"host-0-numa{n}", parent=hosts[0], inventory={"VCPU": 8}) for n in range(2)]
    body = {"name": "moved-fpga", "parent_provider_uuid": hosts[1]}
    assert api.put(f"/resource_providers/{moved}", body, version="1.37").status_code == 200
    disk = api.create_provider(
        "shared-disk", inventory={"DISK_GB": 10000}, traits=["MISC_SHARES_VIA_AGGREGATE"], aggregates=[other_agg, agg]
    )
    consumers = []
    for n, (allocation, project) in enumerate(
        [
            ({hosts[0]: {"MEMORY_MB": 2048}, numa[0]: {"VCPU": 2}, disk: {"DISK_GB": 100}}, "p1"),
            ({hosts[1]: {"VCPU": 4, "MEMORY_MB": 4096}, moved: {"CUSTOM_FPGA": 1}}, "p2"),
            ({hosts[2]: {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 20}}, "p1"),
        ]
    ):
        consumer = new_uuid()
        api.allocate(
            consumer, allocation, project=project, user=f"u{n % 2}", consumer_type="INSTANCE" if n else "MIGRATION"
        )
        consumers.append(consumer)
    assert api.put(f"/berth/leases/{consumers[2]}", {"expires_in": 3600}).status_code == 200
    pick = {
        "query": {"resources": "VCPU:1,MEMORY_MB:256"},
        "consumer": {"uuid": new_uuid(), "project_id": "p3", "user_id": "u3", "consumer_type": "INSTANCE"},
        "server_group": {"uuid": new_uuid(), "policy": "anti-affinity"},
    }
    picked = api.post("/berth/pick", pick)
    assert picked.status_code == 200, picked.data
    consumers.append(pick["consumer"]["uuid"])
    return {"hosts": hosts, "numa": numa, "moved": moved, "disk": disk, "consumers": consumers, "aggregate": agg}


@pytest.fixture
def source(tmp_path_factory, request):
    db = _new_database("sqlite", tmp_path_factory, request)
    api = Api(PlacementApp(db))
    return db, api, _build_books(api)


def _export(db) -> str:
    out = io.StringIO()
    export_books(db, out, exported_at=STAMP)
    return out.getvalue()


def _import(db, text, **kw):
    return import_books(db, io.StringIO(text), **kw)


def _records(text, kind):
    return [record for record in map(orjson.loads, text.splitlines()[1:]) if record["kind"] == kind]


def test_the_file_has_a_header_then_every_kind_of_record_in_order(source):
    db, _api, books = source
    text = _export(db)
    lines = text.splitlines()
    head = orjson.loads(lines[0])
    assert head["format"] == "berth-books" and head["version"] == 2
    assert head["exported_at"] == "2026-05-01T12:00:00.000000Z"
    kinds = [orjson.loads(line)["kind"] for line in lines[1:]]
    assert {kind: kinds.count(kind) for kind in head["counts"]} == head["counts"]
    assert kinds == sorted(kinds, key=list(head["counts"]).index)
    assert head["counts"]["provider"] == 7 and head["counts"]["allocation"] == 11
    assert head["counts"]["resource_class"] == 1 and head["counts"]["lease"] == 1
    assert head["counts"]["server_group"] == 1 and head["counts"]["server_group_member"] == 1
    providers = [record["uuid"] for record in _records(text, "provider")]
    # Parents first: the FPGA provider moved under host-1 comes after it, though created before.
    assert providers.index(books["hosts"][1]) < providers.index(books["moved"])
    assert all("created_at" not in record for record in map(orjson.loads, lines[1:]) if record["kind"] != "lease")


def test_a_round_trip_through_postgresql_gives_the_same_file(source, tmp_path_factory, request):
    db, _api, _books = source
    original = _export(db)
    copy = _new_database("postgresql", tmp_path_factory, request)
    counts = _import(copy, original)
    assert counts == orjson.loads(original.splitlines()[0])["counts"]
    assert _export(copy) == original
    back = _new_database("sqlite", tmp_path_factory, request)
    _import(back, original)
    assert _export(back) == original


def _answers(api, books):
    hosts, consumers = books["hosts"], books["consumers"]
    paths = [
        "/resource_providers",
        "/resource_classes",
        "/traits",
        "/usages?project_id=p1",
        "/usages?project_id=p2&user_id=u1",
        f"/resource_providers?in_tree={hosts[0]}",
        f"/resource_providers?member_of={books['aggregate']}",
        "/resource_providers?resources=VCPU:4",
        "/allocation_candidates?resources=VCPU:1,MEMORY_MB:512",
        "/allocation_candidates?resources=VCPU:2,DISK_GB:50&required=CUSTOM_FAST",
        "/allocation_candidates?resources=CUSTOM_FPGA:1&limit=1",
        "/allocation_candidates?resources=VCPU:1&resources1=VCPU:1&group_policy=isolate",
        *(f"/allocations/{consumer}" for consumer in consumers),
    ]
    for provider in [*hosts, *books["numa"], books["moved"], books["disk"]]:
        paths += [f"/resource_providers/{provider}/{what}" for what in ("inventories", "usages", "allocations")]
        paths += [f"/resource_providers/{provider}/{what}" for what in ("traits", "aggregates")]
    answers = {path: (api.get(path).status_code, api.get(path).json_body) for path in paths}
    leases = api.get("/berth/leases").json_body["leases"]
    answers["leases"] = [{k: v for k, v in lease.items() if k != "expires_in"} for lease in leases]
    return answers


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_copy_answers_the_placement_api_as_the_source_does(source, backend, tmp_path_factory, request):
    db, api, books = source
    copy = _new_database(backend, tmp_path_factory, request)
    _import(copy, _export(db))
    expected = _answers(api, books)
    assert all(status == 200 for status, _body in list(expected.values())[:-1])
    assert _answers(Api(PlacementApp(copy)), books) == expected


def test_the_copy_keeps_serving_writes_and_its_usage_counters(source, tmp_path_factory, request):
    db, _api, books = source
    copy = _new_database("sqlite", tmp_path_factory, request)
    _import(copy, _export(db))
    api = Api(PlacementApp(copy))
    host = books["hosts"][2]
    # 16 VCPU, 1 used: 15 more fit and not one beyond, so inventories.used was set from the allocations.
    api.allocate(new_uuid(), {host: {"VCPU": 16}}, expect=409)
    api.allocate(new_uuid(), {host: {"VCPU": 15}})
    assert api.get(f"/resource_providers/{host}/usages").json_body["usages"]["VCPU"] == 16
    created = api.create_provider("after-import")
    assert api.get(f"/resource_providers/{created}").status_code == 200


def _quotas_priorities_and_preemptions(api):
    """Limits of a project and of one of its users, a consumer placed at a priority, and one preempted
    by it; the answers of Berth's API that show them."""
    assert api.put("/berth/quotas/p1", {"limits": {"VCPU": 40, "consumers": 6}}).status_code == 200
    assert api.put("/berth/quotas/p1/users/u0", {"limits": {"MEMORY_MB": 3000}}).status_code == 200
    small = api.create_provider("small", inventory={"VCPU": 2})

    def pick(project, priority, **extra):
        body = {
            "query": {"resources": "VCPU:2", "in_tree": small},
            "consumer": {"uuid": new_uuid(), "project_id": project, "user_id": "u0", "consumer_type": "INSTANCE"},
            "priority": priority,
            **extra,
        }
        r = api.post("/berth/pick", body)
        assert r.status_code == 200, r.data
        return r.json_body

    pick("p1", -5)
    assert len(pick("p2", 7, preempt=True)["preempted"]) == 1


def _quota_answers(api, db):
    preemptions = api.get("/berth/preemptions").json_body
    with db.engine.connect() as conn:
        priorities = sorted(conn.exec_driver_sql("SELECT consumer_uuid, priority FROM consumer_priorities").all())
        counters = sorted(
            conn.exec_driver_sql(
                "SELECT p.external_id, COALESCE(u.external_id, ''), COALESCE(rc.name, 'consumers'), q.used "
                "FROM quota_usage q JOIN projects p ON p.id = q.project_pk LEFT JOIN users u ON u.id = q.user_pk "
                "LEFT JOIN resource_classes rc ON rc.id = q.resource_class_id WHERE q.used <> 0"
            ).all()
        )
    return {
        "quotas": api.get("/berth/quotas").json_body,
        "p1": api.get("/berth/quotas/p1").json_body,
        "u0": api.get("/berth/quotas/p1/users/u0").json_body,
        "preemptions": preemptions,
        "priorities": priorities,
        "counters": counters,
    }


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_quotas_priorities_and_preemptions_come_through_and_the_copy_enforces_the_quotas(
    source, backend, tmp_path_factory, request
):
    db, api, _books = source
    _quotas_priorities_and_preemptions(api)
    text = _export(db)
    counts = orjson.loads(text.splitlines()[0])["counts"]
    assert (counts["quota"], counts["priority"], counts["preemption"]) == (3, 1, 1)
    copy = _new_database(backend, tmp_path_factory, request)
    _import(copy, text)
    copied = Api(PlacementApp(copy))
    expected = _quota_answers(api, db)
    assert expected["p1"]["usage"]["VCPU"] == 3 and expected["preemptions"]["preemptions"]
    assert _quota_answers(copied, copy) == expected
    assert _export(copy) == text
    # Enforced as in the source: p1 holds 3 of its 40 VCPUs and 2 of its 6 consumers, u0 2560 of
    # 3000 MB.
    host = _books["hosts"][2]
    for answering in (api, copied):
        body = {
            "query": {"resources": "VCPU:1,MEMORY_MB:1000", "in_tree": host},
            "consumer": {"uuid": new_uuid(), "project_id": "p1", "user_id": "u0", "consumer_type": "INSTANCE"},
        }
        r = answering.post("/berth/pick", body)
        assert r.status_code == 409 and "limit 3000, usage 2560, asked 1000" in r.json_body["errors"][0]["detail"]


def _with_line(text, number, replace):
    lines = text.splitlines(keepends=True)
    lines[number - 1] = replace(lines[number - 1])
    return "".join(lines)


def _line_of(text, kind, nth=0):
    numbers = [n for n, line in enumerate(text.splitlines(), start=1) if f'"kind":"{kind}"' in line]
    return numbers[nth]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
@pytest.mark.parametrize(
    ("kind", "damage", "problem"),
    [
        (
            "allocation",
            lambda line: line.replace('"used":', '"used":-'),
            "allocation field used: must be a whole number",
        ),
        (
            "allocation",
            lambda line: re.sub('"provider":"[^"]*"', f'"provider":"{UNKNOWN}"', line),
            "is not a provider of an earlier line",
        ),
        (
            "inventory",
            lambda line: line.replace('"resource_class":"', '"resource_class":"CUSTOM_NO'),
            "neither standard",
        ),
        ("lease", lambda line: line.replace("Z", ""), "is not a UTC time"),
        ("consumer", lambda line: line[:20], "not JSON"),
    ],
)
def test_a_failing_line_leaves_the_target_empty_and_is_named(
    source, tmp_path_factory, request, backend, kind, damage, problem
):
    db, _api, _books = source
    text = _export(db)
    number = _line_of(text, kind, -1)
    copy = _new_database(backend, tmp_path_factory, request)
    with pytest.raises(BooksFileError) as raised:
        _import(copy, _with_line(text, number, damage))
    assert raised.value.line == number and problem in str(raised.value), raised.value
    assert str(raised.value).startswith(f"line {number}: ")
    with copy.engine.connect() as conn:
        assert holdings(conn) == []


def test_a_file_cut_short_or_out_of_order_or_of_another_version_is_refused(source, tmp_path_factory, request):
    db, _api, _books = source
    text = _export(db)
    copy = _new_database("sqlite", tmp_path_factory, request)
    lines = text.splitlines(keepends=True)
    with pytest.raises(BooksFileError, match="the header announces 11 allocation records, the file has 10"):
        _import(copy, "".join(lines[: _line_of(text, "allocation", -1) - 1]))
    moved = lines[:1] + [lines[_line_of(text, "lease") - 1]] + lines[1:]
    with pytest.raises(BooksFileError, match="a resource_class record after the lease records") as raised:
        _import(copy, "".join(moved))
    assert raised.value.line == 3
    with pytest.raises(BooksFileError, match="version 3 is not one this Berth reads"):
        _import(copy, text.replace('"version":2', '"version":3', 1))
    with pytest.raises(BooksFileError, match="not a snapshot"):
        _import(copy, '{"hello": "world"}\n')
    with copy.engine.connect() as conn:
        assert holdings(conn) == []


def test_a_database_with_books_is_refused_without_merge(source, tmp_path_factory, request):
    db, _api, _books = source
    with pytest.raises(TargetNotEmpty, match="7 providers"):
        _import(db, _export(db))


def _revisions(db):
    with db.engine.connect() as conn:
        return dict(conn.exec_driver_sql("SELECT uuid, revision FROM resource_providers").all())


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_merging_the_same_file_changes_nothing(source, backend, tmp_path_factory, request):
    db, _api, _books = source
    text = _export(db)
    copy = _new_database(backend, tmp_path_factory, request)
    _import(copy, text)
    before = _revisions(copy)
    assert not any(_import(copy, text, merge=True).values())
    assert _export(copy) == text
    assert _revisions(copy) == before


def _with_records(text, added):
    """``text`` with records added at the end of their sections and the header's counts to match."""
    lines = text.splitlines(keepends=True)
    head = orjson.loads(lines[0])
    kinds = list(head["counts"])
    for record in added:
        head["counts"][record["kind"]] += 1
        after = max(
            n
            for n, line in enumerate(lines)
            if n and kinds.index(orjson.loads(line)["kind"]) <= kinds.index(record["kind"])
        )
        lines.insert(after + 1, orjson.dumps(record).decode() + "\n")
    lines[0] = orjson.dumps(head).decode() + "\n"
    return "".join(lines)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_merge_adds_what_is_new_and_names_a_conflict(source, backend, tmp_path_factory, request):
    db, api, books = source
    text = _export(db)
    copy = _new_database(backend, tmp_path_factory, request)
    _import(copy, text)
    copy_api = Api(PlacementApp(copy))
    host, new_host, consumer = books["hosts"][2], new_uuid(), new_uuid()
    before = copy_api.get(f"/resource_providers/{host}").json_body
    more = [
        {"kind": "provider", "uuid": new_host, "name": "host-new", "generation": 1, "parent": None, "root": new_host},
        {"kind": "inventory", "provider": new_host, "resource_class": "VCPU", "total": 8, "reserved": 0}
        | {"min_unit": 1, "max_unit": 8, "step_size": 1, "allocation_ratio": 1.0},
        {"kind": "project", "external_id": "p9"},
        {"kind": "consumer", "uuid": consumer, "project": "p9", "user": "u1", "consumer_type": None, "generation": 1},
        {"kind": "allocation", "consumer": consumer, "provider": new_host, "resource_class": "VCPU", "used": 3},
        {"kind": "allocation", "consumer": consumer, "provider": host, "resource_class": "VCPU", "used": 5},
    ]
    counts = _import(copy, _with_records(text, more), merge=True)
    # What the merge wrote: the new records alone.
    assert {kind: n for kind, n in counts.items() if n} == {
        "provider": 1,
        "inventory": 1,
        "project": 1,
        "consumer": 1,
        "allocation": 2,
    }
    allocations = copy_api.get(f"/allocations/{consumer}").json_body["allocations"]
    assert {uuid: a["resources"] for uuid, a in allocations.items()} == {new_host: {"VCPU": 3}, host: {"VCPU": 5}}
    assert copy_api.get(f"/resource_providers/{host}/usages").json_body["usages"]["VCPU"] == 1 + 5
    # An existing provider that received allocations moves on, as an allocation write moves it.
    assert copy_api.get(f"/resource_providers/{host}").json_body["generation"] == before["generation"] + 1
    assert copy_api.get("/usages?project_id=p9").json_body["usages"]["unknown"] == {"VCPU": 8, "consumer_count": 1}

    fresh = _new_database(backend, tmp_path_factory, request)
    _import(fresh, text)
    renamed = text.replace('"name":"host-1"', '"name":"host-one"')
    with pytest.raises(BooksConflict, match=f"line [0-9]+: the target holds provider {books['hosts'][1]} as"):
        _import(fresh, renamed, merge=True)
    disk = books["disk"]
    fewer = [line for line in text.splitlines(keepends=True) if not ('"kind":"inventory"' in line and disk in line)]
    fewer[0] = fewer[0].replace(
        f'"inventory":{_count(text, "inventory")}', f'"inventory":{_count(text, "inventory") - 1}'
    )
    with pytest.raises(BooksConflict, match=f"the target's provider {disk} has inventory {disk} / DISK_GB"):
        _import(fresh, "".join(fewer), merge=True)
    extra = _with_records(text, [more[4] | {"consumer": books["consumers"][0]}])
    with pytest.raises(BooksConflict, match=f"holds consumer {books['consumers'][0]} without allocation"):
        _import(fresh, extra, merge=True)
    assert _export(fresh) == text


def _keys_and_indexes(db):
    """Every constraint and index of a PostgreSQL database's tables, as PostgreSQL defines them."""
    with db.engine.connect() as conn:
        constraints = conn.exec_driver_sql(
            "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2"
        ).all()
        indexes = conn.exec_driver_sql(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1"
        ).all()
    return constraints, indexes


def test_an_import_into_postgresql_leaves_every_foreign_key_and_index_as_it_found_them(
    source, tmp_path_factory, request
):
    # The import sets the foreign keys and plain indexes aside while it copies, and puts them back.
    db, _api, _books = source
    text = _export(db)
    copy = _new_database("postgresql", tmp_path_factory, request)
    schema = _keys_and_indexes(copy)
    constraints, indexes = schema
    assert ("allocations", "fk_allocations_resource_provider_id_resource_providers") in [c[:2] for c in constraints]
    assert "ix_inventories_headroom" in [name for name, _definition in indexes]
    damaged = _with_line(text, _line_of(text, "allocation", -1), lambda line: line[:20])
    with pytest.raises(BooksFileError):
        _import(copy, damaged)
    assert _keys_and_indexes(copy) == schema
    _import(copy, text)
    assert _keys_and_indexes(copy) == schema
    assert _export(copy) == text
    with copy.engine.begin() as conn, pytest.raises(IntegrityError):
        conn.exec_driver_sql(
            "INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used, created_at, "
            f"updated_at) VALUES (999999, '{UNKNOWN}', 0, 1, now(), now())"
        )


def test_a_role_that_does_not_own_the_tables_imports_with_the_checks_in_place(source, tmp_path_factory, request):
    db, _api, _books = source
    text = _export(db)
    owner = _new_database("postgresql", tmp_path_factory, request)
    role = f"importer_{uuid.uuid4().hex[:12]}"
    with owner.engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN")
        conn.exec_driver_sql(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}")
        conn.exec_driver_sql(f"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {role}")
    url = owner.engine.url.set(username=role)
    importer = Database(url.render_as_string(hide_password=False))
    request.addfinalizer(importer.dispose)
    assert _import(importer, text)["allocation"] == 11
    assert _export(owner) == text


def _count(text, kind):
    return orjson.loads(text.splitlines()[0])["counts"][kind]


def test_progress_is_reported_per_section(source):
    db, _api, _books = source
    seen = []
    export_books(db, io.StringIO(), progress=lambda kind, done, total: seen.append((kind, done, total)))
    assert ("provider", 7, 7) in seen and ("allocation", 11, 11) in seen


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_an_import_of_a_synthetic_cloud_counts_every_allocation(backend, tmp_path_factory, request):
    # Its speed is measured by the synthetic benchmark (docs/backup.md), not here.
    snapshot = io.StringIO()
    counts = write_snapshot(snapshot, 2000, 30000)
    copy = _new_database(backend, tmp_path_factory, request)
    snapshot.seek(0)
    assert import_books(copy, snapshot) == counts
    with copy.engine.connect() as conn:
        used = conn.exec_driver_sql("SELECT SUM(used) FROM inventories").scalar_one()
    assert used == 10000 * (2 + 4096 + 40)
