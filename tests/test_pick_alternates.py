"""POST /berth/pick's alternates: the next best trees after the one claimed, each with an allocation
request that fits, none of them written; on the board and in the full search, on both databases."""

from __future__ import annotations

import math

import pytest
from apihelpers import Api, new_uuid

from berth.store import schema
from berth.store.pick.board.host_board import HostBoard

SMALL = {"VCPU": 1, "MEMORY_MB": 512}
RAM_ONLY = {"ram": 1, "cpu": 0, "disk": 0}
# A condition every host meets that the board does not weigh: the pick then searches every tree.
SEARCHED = {"required": "!COMPUTE_STATUS_DISABLED"}


@pytest.fixture(params=["board", "search"])
def api(request, api, app, db):
    """Every test runs twice: picks weighed on the process's board (read again before each pick)
    and picks that search every tree."""
    with db.engine.begin() as conn:
        conn.execute(schema.server_group_members.delete())
        conn.execute(schema.server_groups.delete())
    app.host_board = HostBoard(min_age=0.0, enabled=request.param == "board")
    return api


def _body(resources=SMALL, *, alternates=None, multipliers=RAM_ONLY, group=None, query=None, policy=None):
    body = {
        "query": {"resources": ",".join(f"{rc}:{n}" for rc, n in resources.items()), **(query or {})},
        "consumer": {"uuid": new_uuid(), "project_id": "proj", "user_id": "user", "consumer_type": "INSTANCE"},
        "weigh": {"multipliers": multipliers, **({"policy": policy} if policy else {})},
    }
    if alternates is not None:
        body["alternates"] = alternates
    if group:
        body["server_group"] = {"uuid": group[0], "policy": group[1]}
    return body


def _pick(api, resources=SMALL, **kw):
    r = api.post("/berth/pick", _body(resources, **kw))
    assert r.status_code == 200, r.data
    return r.json_body


def _hosts_by_ram(api, count, step=1024):
    """Hosts alike but for their memory, most first: under the RAM weigher alone, best first."""
    return [
        api.create_provider(f"host-{i}", inventory={"VCPU": 8, "MEMORY_MB": 8192 - step * i, "DISK_GB": 100})
        for i in range(count)
    ]


def _roots(answer):
    return [alternate["root_provider_uuid"] for alternate in answer["alternates"]]


def _usages(api, provider):
    return api.get(f"/resource_providers/{provider}/usages").json_body["usages"]


@pytest.mark.parametrize("query", [None, SEARCHED], ids=["plain", "searched"])
def test_alternates_are_the_next_best_trees_each_with_a_request_that_fits(api, query):
    hosts = _hosts_by_ram(api, 5)
    answer = _pick(api, alternates=3, query=query)
    assert answer["root_provider_uuid"] == hosts[0]
    assert _roots(answer) == hosts[1:4]
    # Free RAM 7168, 6144 and 5120 of 4096..8192, normalised.
    assert [a["weight"] for a in answer["alternates"]] == pytest.approx([0.75, 0.5, 0.25])
    for alternate in answer["alternates"]:
        root = alternate["root_provider_uuid"]
        assert alternate["allocation_request"] == {
            "allocations": {root: {"resources": SMALL}},
            "mappings": {"": [root]},
        }


def test_alternates_are_not_written(api):
    hosts = _hosts_by_ram(api, 4)
    consumer = new_uuid()
    body = _body(alternates=3)
    body["consumer"]["uuid"] = consumer
    r = api.post("/berth/pick", body)
    assert r.status_code == 200, r.data
    assert _roots(r.json_body) == hosts[1:]
    held = api.get(f"/allocations/{consumer}").json_body["allocations"]
    assert set(held) == {hosts[0]}
    for host in hosts[1:]:
        assert _usages(api, host) == {"VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0}
        assert api.get(f"/resource_providers/{host}/allocations").json_body["allocations"] == {}


def test_a_tree_without_room_is_no_alternate(api):
    hosts = _hosts_by_ram(api, 4)
    api.allocate(new_uuid(), {hosts[1]: {"VCPU": 8}})
    answer = _pick(api, alternates=10)
    assert answer["root_provider_uuid"] == hosts[0]
    assert _roots(answer) == hosts[2:]


def test_an_alternate_fits_the_books_after_the_picks_own_write(api):
    # Two hosts on one shared disk pool: what the pick takes of it is not there for an alternate.
    aggregate = new_uuid()
    for name in ("a", "b"):
        api.create_provider(name, inventory={"VCPU": 8, "MEMORY_MB": 8192}, aggregates=[aggregate])
    api.create_provider(
        "pool", inventory={"DISK_GB": 100}, traits=["MISC_SHARES_VIA_AGGREGATE"], aggregates=[aggregate]
    )
    # Room for two: the other host is named, with the pool's disk.
    answer = _pick(api, {"VCPU": 1, "DISK_GB": 30}, alternates=2)
    (alternate,) = answer["alternates"]
    assert alternate["root_provider_uuid"] != answer["root_provider_uuid"]
    amounts = sorted(alternate["allocation_request"]["allocations"].values(), key=str)
    assert amounts == [{"resources": {"DISK_GB": 30}}, {"resources": {"VCPU": 1}}]
    # 70 left, for both hosts before the pick takes 40 of it, and for neither after.
    answer = _pick(api, {"VCPU": 1, "DISK_GB": 40}, alternates=2)
    assert answer["trees_fitted"] == 2
    assert answer["alternates"] == []


def test_a_tree_whose_root_the_query_refuses_is_no_alternate(api):
    hosts = _hosts_by_ram(api, 4)
    disabled = {"resource_provider_generation": 1, "traits": ["COMPUTE_STATUS_DISABLED"]}
    assert api.put(f"/resource_providers/{hosts[1]}/traits", disabled).status_code == 200
    answer = _pick(api, alternates=10, query={"root_required": "!COMPUTE_STATUS_DISABLED"})
    assert answer["root_provider_uuid"] == hosts[0]
    assert _roots(answer) == hosts[2:]


@pytest.mark.parametrize("alternates", [None, 0])
def test_none_asked_is_an_empty_list(api, alternates):
    _hosts_by_ram(api, 3)
    assert _pick(api, alternates=alternates)["alternates"] == []


@pytest.mark.parametrize("query", [None, SEARCHED], ids=["plain", "searched"])
def test_no_other_tree_is_an_empty_list(api, query):
    (host,) = _hosts_by_ram(api, 1)
    api.create_provider("too-small", inventory={"VCPU": 8, "MEMORY_MB": 256})
    answer = _pick(api, alternates=5, query=query)
    assert answer["root_provider_uuid"] == host
    assert answer["alternates"] == []


def test_anti_affinity_names_no_tree_holding_a_member(api):
    hosts = _hosts_by_ram(api, 4)
    group = (new_uuid(), "anti-affinity")
    first = _pick(api, alternates=10, group=group)
    assert first["root_provider_uuid"] == hosts[0]
    # The member just placed counts.
    assert _roots(first) == hosts[1:]
    second = _pick(api, alternates=10, group=group)
    assert second["root_provider_uuid"] == hosts[1]
    assert _roots(second) == hosts[2:]


def test_affinity_names_only_trees_holding_a_member(api):
    hosts = _hosts_by_ram(api, 3)
    group = (new_uuid(), "affinity")
    # The first member's tree is the only one holding a member, and it is the one claimed.
    assert _pick(api, alternates=3, group=group)["alternates"] == []
    assert _pick(api, alternates=3, group=group)["root_provider_uuid"] == hosts[0]
    # Soft affinity only weighs: the other trees are named.
    soft = _pick(api, alternates=3, group=(new_uuid(), "soft-affinity"))
    assert len(soft["alternates"]) == 2 and soft["root_provider_uuid"] not in _roots(soft)


def test_ties_come_in_random_order(api):
    hosts = {api.create_provider(f"big-{i}", inventory={"VCPU": 1000}) for i in range(4)}
    firsts = set()
    # With every weigher off, all hosts weigh 0 on every pick.
    for _ in range(30):
        answer = _pick(api, {"VCPU": 1}, alternates=3, multipliers={"ram": 0, "cpu": 0, "disk": 0})
        roots = _roots(answer)
        assert len(roots) == 3 and {answer["root_provider_uuid"], *roots} == hosts
        assert [a["weight"] for a in answer["alternates"]] == [0.0] * 3
        firsts.add(roots[0])
    assert len(firsts) > 1


@pytest.mark.parametrize(
    "alternates", [-1, 11, "2", 1.5, True, None], ids=["negative", "11", "string", "1.5", "bool", "null"]
)
def test_a_bad_number_is_a_400(api, alternates):
    _hosts_by_ram(api, 2)
    body = _body()
    body["alternates"] = alternates
    r = api.post("/berth/pick", body)
    assert r.status_code == 400, r.data
    error = r.json_body["errors"][0]
    assert error["status"] == 400 and "alternates" in error["detail"]


def test_a_board_behind_the_books_still_names_trees_that_fit(app, db):
    # The board read only when the test says so.
    app.host_board = HostBoard(min_age=math.inf)
    api = Api(app)
    hosts = _hosts_by_ram(api, 24, step=256)
    db.read(lambda conn: app.host_board.refresh(conn, app.provider_cache, force=True))
    # Taken since the board's read, which still ranks them as it did: the pick walks past the first
    # ten, and its alternates past the trees it planned to try (16) into the rest of the ranking.
    for taken in [*hosts[:10], hosts[12]]:
        api.allocate(new_uuid(), {taken: {"VCPU": 8}})
    answer = _pick(api, alternates=10)
    assert answer["root_provider_uuid"] == hosts[10]
    assert _roots(answer) == [hosts[11], *hosts[13:22]]


def test_a_tree_freed_since_the_board_was_read_is_still_an_alternate(app, db):
    """The board thinks the tree full; its alternates still search it, after the others."""
    app.host_board = HostBoard(min_age=math.inf)
    api = Api(app)
    hosts = _hosts_by_ram(api, 3)
    holder = new_uuid()
    api.allocate(holder, {hosts[2]: {"VCPU": 8}})
    db.read(lambda conn: app.host_board.refresh(conn, app.provider_cache, force=True))
    assert api.delete(f"/allocations/{holder}").status_code == 204
    answer = _pick(api, alternates=2)
    assert answer["root_provider_uuid"] == hosts[0]
    assert _roots(answer) == [hosts[1], hosts[2]]
