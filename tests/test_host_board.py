"""The board a pick weighs every tree on: the same facts and weights as the search's, and a board
behind the books never over-commits nor refuses while a tree fits."""

from __future__ import annotations

import math
import random
import time

import numpy as np
import pytest
from apihelpers import Api, new_uuid
from dbhelpers import reset
from hypothesis import given
from hypothesis import strategies as st
from livehelpers import free_port

from berth.api.app import PlacementApp
from berth.api.settings import Settings
from berth.domain.weighing import HostFacts, Multipliers, best_first, weigh
from berth.domain.weighing_arrays import best_first_of, weigh_arrays
from berth.store import schema
from berth.store.candidates.provider_cache import ProviderCache
from berth.store.database import Database
from berth.store.pick.board import host_board
from berth.store.pick.board.host_board import HostBoard
from berth.store.placement.allocations import ConsumerAllocations, replace_allocations

HOST = {"VCPU": 8, "MEMORY_MB": 8192, "DISK_GB": 100}


@pytest.fixture
def board(app, db):
    with db.engine.begin() as conn:
        conn.execute(schema.server_group_members.delete())
        conn.execute(schema.server_groups.delete())
    # Read only when the test says so: what it holds in between is a board behind the books.
    app.host_board = HostBoard(min_age=math.inf)
    return app.host_board


def _refresh(app, db):
    db.read(lambda conn: app.host_board.refresh(conn, app.provider_cache, force=True))


def _pick(api, resources, expect=200, group=None, policy="spread"):
    body = {
        "query": {"resources": ",".join(f"{rc}:{n}" for rc, n in resources.items())},
        "consumer": {"uuid": new_uuid(), "project_id": "p", "user_id": "u", "consumer_type": "INSTANCE"},
        "weigh": {"policy": policy},
    }
    if group:
        body["server_group"] = {"uuid": group[0], "policy": group[1]}
    r = api.post("/berth/pick", body)
    assert r.status_code == expect, r.data
    return r.json_body


def _usage(api, provider):
    return api.get(f"/resource_providers/{provider}/usages").json_body["usages"]


def test_the_board_holds_each_trees_free_amounts_and_room(api, app, db, board):
    a = api.create_provider("a", inventory={"VCPU": {"total": 8, "allocation_ratio": 2.0}, "MEMORY_MB": 8192})
    numa = api.create_provider("numa", inventory={"VCPU": 4})
    for cell in range(2):
        api.create_provider(f"numa-{cell}", parent=numa, inventory={"MEMORY_MB": 1024 * (cell + 1)})
    api.allocate(new_uuid(), {a: {"VCPU": 3, "MEMORY_MB": 1000}})
    _refresh(app, db)
    view = board.view
    at_a, at_numa = view.index_of[_id(db, a)], view.index_of[_id(db, numa)]
    assert view.cpus[at_a] == 8 * 2.0 - 3 and view.ram[at_a] == 8192 - 1000
    # A tree counts its cells' memory together; its room is the most one cell can take.
    assert view.ram[at_numa] == 1024 + 2048
    memory = _class_id(db, "MEMORY_MB")
    assert view.room_of(memory)[at_numa] == 2048


def test_a_refresh_reads_again_only_what_changed(api, app, db, board):
    a = api.create_provider("a", inventory=HOST)
    b = api.create_provider("b", inventory=HOST)
    _refresh(app, db)
    first = board.view
    api.allocate(new_uuid(), {a: {"MEMORY_MB": 1000}})
    _refresh(app, db)
    # The same trees: the arrays are written in place.
    assert board.view is first and board.view.ram[board.view.index_of[_id(db, a)]] == 8192 - 1000
    assert api.delete(f"/resource_providers/{b}").status_code == 204
    c = api.create_provider("c", inventory={"VCPU": 2})
    _refresh(app, db)
    view = board.view
    assert set(view.index_of) == {_id(db, a), _id(db, c)}
    assert view.cpus[view.index_of[_id(db, c)]] == 2 and view.ram[view.index_of[_id(db, c)]] == 0


def _id(db, uuid):
    with db.engine.connect() as conn:
        return conn.execute(
            schema.resource_providers.select()
            .with_only_columns(schema.resource_providers.c.id)
            .where(schema.resource_providers.c.uuid == uuid)
        ).scalar_one()


def _class_id(db, name):
    with db.engine.connect() as conn:
        return conn.execute(
            schema.resource_classes.select()
            .with_only_columns(schema.resource_classes.c.id)
            .where(schema.resource_classes.c.name == name)
        ).scalar_one()


def test_a_tree_filled_since_the_board_was_read_is_passed_over_without_over_commit(api, app, db, board):
    big = api.create_provider("big", inventory={"VCPU": 64, "MEMORY_MB": 65536})
    small = api.create_provider("small", inventory={"VCPU": 8, "MEMORY_MB": 8192})
    _refresh(app, db)
    # Another writer takes nearly all of the tree the board ranks first.
    api.allocate(new_uuid(), {big: {"VCPU": 63, "MEMORY_MB": 65000}})
    answer = _pick(api, {"VCPU": 2, "MEMORY_MB": 1024})
    assert answer["root_provider_uuid"] == small
    assert _usage(api, big) == {"VCPU": 63, "MEMORY_MB": 65000}


def test_a_tree_added_or_freed_since_the_board_was_read_is_still_found(api, app, db, board):
    full = api.create_provider("full", inventory={"VCPU": 2, "MEMORY_MB": 2048})
    holder = new_uuid()
    api.allocate(holder, {full: {"VCPU": 2, "MEMORY_MB": 2048}})
    _refresh(app, db)
    added = api.create_provider("added", inventory=HOST)
    assert _pick(api, {"VCPU": 2, "MEMORY_MB": 1024})["root_provider_uuid"] == added
    api.allocate(new_uuid(), {added: {"VCPU": 6, "MEMORY_MB": 7000}})
    assert api.delete(f"/allocations/{holder}").status_code == 204
    # The board still has "full" full and "added" with room: neither is so any more.
    assert _pick(api, {"VCPU": 2, "MEMORY_MB": 1024})["root_provider_uuid"] == full


def test_picks_between_two_reads_spread_over_identical_trees(api, app, db, board):
    hosts = {api.create_provider(f"h{i}", inventory=HOST) for i in range(4)}
    _refresh(app, db)
    chosen = [_pick(api, {"VCPU": 1, "MEMORY_MB": 512})["root_provider_uuid"] for _ in range(4)]
    # Each claim is taken off its tree on the board at once, so the next weighs it lower.
    assert set(chosen) == hosts


def test_anti_affinity_on_a_stale_board_holds(api, app, db, board):
    hosts = {api.create_provider(f"h{i}", inventory=HOST) for i in range(3)}
    _refresh(app, db)
    group = (new_uuid(), "anti-affinity")
    placed = [_pick(api, {"VCPU": 1}, group=group)["root_provider_uuid"] for _ in range(3)]
    assert set(placed) == hosts
    refusal = api.post(
        "/berth/pick",
        {
            "query": {"resources": "VCPU:1"},
            "consumer": {"uuid": new_uuid(), "project_id": "p", "user_id": "u", "consumer_type": "INSTANCE"},
            "server_group": {"uuid": group[0], "policy": group[1]},
        },
    )
    assert refusal.status_code == 409


def test_a_sharing_pools_disk_counts_for_the_trees_anchored_to_it(api, app, db, board):
    aggregate = new_uuid()
    anchored = api.create_provider("anchored", inventory={"VCPU": 8, "MEMORY_MB": 4096}, aggregates=[aggregate])
    api.create_provider("alone", inventory={"VCPU": 8, "MEMORY_MB": 4096, "DISK_GB": 10})
    api.create_provider(
        "pool", inventory={"DISK_GB": 1000}, traits=["MISC_SHARES_VIA_AGGREGATE"], aggregates=[aggregate]
    )
    _refresh(app, db)
    # Only the anchored host can take 500 GB, from the pool.
    answer = _pick(api, {"VCPU": 1, "DISK_GB": 500})
    assert answer["root_provider_uuid"] == anchored


def test_a_pool_another_writer_filled_since_the_boards_read_is_tried_and_passed_over(api, app, db, board):
    # The picks weigh the pools as the board's last refresh read them: a pool filled since by
    # another writer still ranks its tree first, whose claim is then refused, and the pick goes to
    # the next tree, over-committing nothing; the next refresh reads the pool as it is.
    aggregate = new_uuid()
    anchored = api.create_provider("anchored", inventory={"VCPU": 8, "MEMORY_MB": 4096}, aggregates=[aggregate])
    alone = api.create_provider("alone", inventory={"VCPU": 8, "MEMORY_MB": 4096, "DISK_GB": 600})
    pool = api.create_provider(
        "pool", inventory={"DISK_GB": 1000}, traits=["MISC_SHARES_VIA_AGGREGATE"], aggregates=[aggregate]
    )
    _refresh(app, db)
    api.allocate(new_uuid(), {pool: {"DISK_GB": 900}})

    def pool_used():
        (copy,) = (p for p in app.host_board.pools().values() if p.uuid == pool)
        return [inventory.used for inventory in copy.inventories.values()]

    assert pool_used() == [0]  # as the board read it, before the fill
    disk_first = {"ram": 0, "cpu": 0, "disk": 1}
    assert _pick_weighed(api, {"VCPU": 1, "DISK_GB": 500}, disk_first)["root_provider_uuid"] == alone
    assert api.get(f"/resource_providers/{pool}/usages").json_body["usages"]["DISK_GB"] == 900
    _refresh(app, db)
    assert pool_used() == [900]
    # Neither the anchored host (100 GB left in its pool) nor the other (100 left) can take 500.
    refusal = _pick(api, {"VCPU": 1, "DISK_GB": 500, "MEMORY_MB": 1}, expect=409)
    assert refusal["errors"][0]["code"] == "berth.pick.no_valid_host"
    assert api.get(f"/resource_providers/{anchored}/usages").json_body["usages"]["VCPU"] == 0


def _pick_weighed(api, resources, multipliers):
    body = {
        "query": {"resources": ",".join(f"{rc}:{n}" for rc, n in resources.items())},
        "consumer": {"uuid": new_uuid(), "project_id": "p", "user_id": "u", "consumer_type": "INSTANCE"},
        "weigh": {"policy": "spread", "multipliers": multipliers},
    }
    r = api.post("/berth/pick", body)
    assert r.status_code == 200, r.data
    return r.json_body


def test_a_pools_disk_taken_since_the_board_was_read_weighs_and_fits_as_it_now_is(api, app, db, board):
    # Each pick reads the pools as they stand, while the board (and what it worked out from the
    # pools once) stays as it was read.
    first, second = new_uuid(), new_uuid()
    host_a = api.create_provider("a", inventory={"VCPU": 8, "MEMORY_MB": 4096}, aggregates=[first])
    host_b = api.create_provider("b", inventory={"VCPU": 8, "MEMORY_MB": 4096}, aggregates=[second])
    for name, disk, aggregate in (("pool-a", 1000, first), ("pool-b", 600, second)):
        api.create_provider(
            name, inventory={"DISK_GB": disk}, traits=["MISC_SHARES_VIA_AGGREGATE"], aggregates=[aggregate]
        )
    _refresh(app, db)

    def pick():
        body = {
            "query": {"resources": "VCPU:1,DISK_GB:500"},
            "consumer": {"uuid": new_uuid(), "project_id": "p", "user_id": "u", "consumer_type": "INSTANCE"},
            "weigh": {"policy": "spread", "multipliers": {"ram": 0, "cpu": 0, "disk": 1}},
        }
        r = api.post("/berth/pick", body)
        assert r.status_code == 200, r.data
        return r.json_body["root_provider_uuid"]

    assert pick() == host_a  # 1000 GB free against 600
    assert pick() == host_b  # 500 against 600
    assert pick() == host_a  # pool-b has 100 left: only pool-a can take 500
    assert _pick(api, {"VCPU": 1, "DISK_GB": 500}, expect=409)["errors"][0]["code"] == "berth.pick.no_valid_host"


def _pick_writes(monkeypatch, fill=None):
    """The pick handler's writes, as whether each wrote its first claim bare; ``fill(plan)`` runs
    between the plan and the write, from a connection of its own."""
    from berth.api.handlers.claims import pick as pick_handler

    writes: list[bool] = []
    real_plan, real_pick = pick_handler.plan_on_board, pick_handler.pick_and_claim

    def plan_then_fill(conn, request, cache, board):
        plan = real_plan(conn, request, cache, board)
        if fill is not None:
            fill(plan)
        return plan

    def recorded(conn, request, cache, plan, **options):
        writes.append(options["bare_first_claim"])
        return real_pick(conn, request, cache, plan, **options)

    monkeypatch.setattr(pick_handler, "plan_on_board", plan_then_fill)
    monkeypatch.setattr(pick_handler, "pick_and_claim", recorded)
    return writes


def test_a_pick_writes_its_first_claim_once_without_a_savepoint(api, app, db, board, monkeypatch):
    host = api.create_provider("a", inventory=HOST)
    _refresh(app, db)
    writes = _pick_writes(monkeypatch)
    assert _pick(api, {"VCPU": 1})["root_provider_uuid"] == host
    # On PostgreSQL the bare claim writes the consumer's row too, and leaves a consumer whose project
    # and user are new to the usual way, which makes them: the first pick of an owner is written again.
    assert writes == ([True] if db.is_sqlite else [True, False])
    del writes[:]
    assert _pick(api, {"VCPU": 1})["root_provider_uuid"] == host
    assert writes == [True]


def test_a_tree_filled_between_the_plan_and_the_write_is_given_up_whole_and_the_pick_written_again(
    api, app, db, board, monkeypatch
):
    roomy = api.create_provider("roomy", inventory={"VCPU": 4, "MEMORY_MB": 8192})
    other = api.create_provider("other", inventory={"VCPU": 4, "MEMORY_MB": 4096})
    _refresh(app, db)
    other_writer = Database(db.url)

    def fill(plan):
        # Another writer takes every VCPU of the tree the plan tries first, the one it searched.
        assert plan.trees[0].candidates and plan.providers[plan.trees[0].root_id].uuid == roomy
        taken = ConsumerAllocations(new_uuid(), {roomy: {"VCPU": 4}}, "p", "u", None, "INSTANCE")
        other_writer.write(lambda conn: replace_allocations(conn, [taken], new_consumers=True))

    writes = _pick_writes(monkeypatch, fill)
    try:
        answer = _pick(api, {"VCPU": 2, "MEMORY_MB": 1024})
    finally:
        other_writer.dispose()
    assert writes == [True, False]
    assert answer["root_provider_uuid"] == other
    # Nothing of the refused write is left: the roomy tree holds the other writer's claim alone.
    assert _usage(api, roomy) == {"VCPU": 4, "MEMORY_MB": 0}
    assert _usage(api, other) == {"VCPU": 2, "MEMORY_MB": 1024}
    assert set(answer["allocation_request"]["allocations"]) == {other}


# --- the arithmetic ------------------------------------------------------------------------------

facts = st.lists(
    st.tuples(st.integers(0, 10_000), st.integers(0, 64), st.integers(0, 2_000), st.integers(0, 3)),
    min_size=1,
    max_size=40,
)
multipliers = st.builds(
    Multipliers,
    ram=st.sampled_from([-2.0, -1.0, 0.0, 1.0, 3.5]),
    cpu=st.sampled_from([-1.0, 0.0, 1.0]),
    disk=st.sampled_from([-1.0, 0.0, 1.0, 2.0]),
    instances=st.just(0.0),
    soft_affinity=st.sampled_from([0.0, 1.0, 5.0]),
    soft_anti_affinity=st.sampled_from([0.0, 1.0, 5.0]),
)


@given(hosts=facts, weights=multipliers, policy=st.sampled_from([None, "soft-affinity", "soft-anti-affinity"]))
def test_arrays_weigh_as_the_weighers_do(hosts, weights, policy):
    expected = weigh([HostFacts(r, c, d, 0, g) for r, c, d, g in hosts], weights, policy)
    columns = [np.array([host[i] for host in hosts], dtype=np.float64) for i in range(4)]
    assert weigh_arrays(*columns, weights, policy).tolist() == expected


@given(
    hosts=facts,
    weights=multipliers,
    policy=st.sampled_from([None, "soft-affinity", "soft-anti-affinity"]),
    chosen=st.lists(st.booleans(), min_size=40, max_size=40),
)
def test_arrays_weighed_where_a_mask_says_weigh_as_those_hosts_alone(hosts, weights, policy, chosen):
    mask = np.array(chosen[: len(hosts)])
    columns = [np.array([host[i] for host in hosts], dtype=np.float64) for i in range(4)]
    alone = weigh_arrays(*(column[mask] for column in columns), weights, policy)
    where = weigh_arrays(*columns, weights, policy, where=mask)
    assert where[mask].tolist() == alone.tolist()
    assert (where[~mask] == -np.inf).all()


@given(weights=st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.0 + 1e-12, 2.0]), min_size=1, max_size=20))
def test_best_first_of_orders_as_best_first(weights):
    ordered = list(best_first_of(np.array(weights), random.Random(0).randrange))
    again = best_first(weights, shuffle=random.Random(0).shuffle)
    # The same runs of ties in the same order, each in an order of its own.
    assert sorted(ordered) == list(range(len(weights)))
    assert [round(weights[i], 6) for i in ordered] == [round(weights[i], 6) for i in again]


def test_ties_are_broken_at_random():
    firsts = {next(best_first_of(np.array([1.0, 1.0, 1.0, 0.5]))) for _ in range(200)}
    assert firsts == {0, 1, 2}


def test_a_background_thread_keeps_the_board_fresh_while_picks_read_it(api, app, db):
    board = HostBoard(min_age=0.05)
    host = api.create_provider("h", inventory=HOST)
    board.refresh_in_background(db, app.provider_cache)
    try:
        # Read at once; the first pick waits for that read rather than finding the board empty.
        assert list(board.use().index_of) == [_id(db, host)]
        api.allocate(new_uuid(), {host: {"VCPU": 3}})
        deadline = time.monotonic() + 10
        while board.view.cpus[0] == 8 and time.monotonic() < deadline:
            board.use()
            time.sleep(0.02)
        assert board.view.cpus[0] == 5
    finally:
        board.stop_refreshing()


def test_a_board_no_pick_reads_still_follows_the_cloud_seldom(api, app, db, monkeypatch):
    monkeypatch.setattr(host_board, "UNUSED_SECONDS", 0.2)
    monkeypatch.setattr(host_board, "UNUSED_REFRESH_SECONDS", 0.5)
    monkeypatch.setattr(host_board, "UNUSED_REFRESH_SHARE", 1.0)
    board = HostBoard(min_age=0.05)
    board.refresh_in_background(db, app.provider_cache)
    try:
        deadline = time.monotonic() + 10
        while not board.last_refresh_seconds and time.monotonic() < deadline:
            time.sleep(0.02)
        # No pick reads it: a cloud built since is on the board within the unused board's interval.
        hosts = [api.create_provider(f"h{i}", inventory=HOST) for i in range(3)]
        while len(board.view.roots) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sorted(board.view.index_of) == sorted(_id(db, host) for host in hosts)
    finally:
        board.stop_refreshing()


def test_an_unused_board_is_read_again_each_second_unless_reading_it_costs_more():
    # The boards of the workers no pick reached yet follow a cloud being built, so that its first
    # picks do not wait for a read of every tree; a large cloud's board, dear to read, less often.
    board = HostBoard(min_age=0.05)
    now = time.monotonic()
    board._used_at = now - 2 * host_board.UNUSED_SECONDS
    board._read_at, board.last_refresh_seconds = now - 0.5, 0.001
    assert not board.due()
    board._read_at = now - 1.5
    assert board.due()
    board.last_refresh_seconds = 0.1  # a refresh's share allows one every 5 s
    assert not board.due()
    board._read_at = now - 6
    assert board.due()
    # A large cloud's board, whose reads take seconds, is still read at least every 30 s.
    board.last_refresh_seconds = 5.0
    board._read_at = now - 20
    assert not board.due()
    board._read_at = now - host_board.UNUSED_STALEST_SECONDS - 1
    assert board.due()
    # Read by picks lately: as often as its refreshes allow.
    board._used_at, board._read_at = now, now - 0.2
    board._age_needed = 0.1
    assert board.due()


def test_a_pick_on_an_empty_board_reads_it_first(api, app, db, board):
    hosts = {api.create_provider(f"h{i}", inventory=HOST) for i in range(3)}
    assert not len(board.view.roots)
    answer = _pick(api, {"VCPU": 1})
    # Weighed on the board, read for this pick outside its write, not by a search of every tree.
    assert len(board.view.roots) == 3 and answer["root_provider_uuid"] in hosts


def _pick_enabled(api, resources, root_required="!COMPUTE_STATUS_DISABLED"):
    body = {
        "query": {"resources": resources, "root_required": root_required},
        "consumer": {"uuid": new_uuid(), "project_id": "p", "user_id": "u", "consumer_type": "INSTANCE"},
    }
    r = api.post("/berth/pick", body)
    assert r.status_code == 200, r.data
    return r.json_body["root_provider_uuid"]


def test_nova_requests_with_root_traits_are_weighed_on_the_board(api, app, db, board):
    """Nova asks every request with a disabled compute node's trait forbidden at the root: such a
    request is weighed on the board, and a disabled host (the emptiest here) is never chosen."""
    disabled = api.create_provider(
        "disabled", inventory={"VCPU": 64, "MEMORY_MB": 65536}, traits=["COMPUTE_STATUS_DISABLED"]
    )
    enabled = {api.create_provider(f"h{i}", inventory=HOST) for i in range(2)}
    assert not len(board.view.roots)
    chosen = {_pick_enabled(api, "VCPU:1,MEMORY_MB:512") for _ in range(4)}
    assert len(board.view.roots) == 3  # read for the pick: the board's path, not the full search
    assert chosen == enabled and not any(_usage(api, disabled).values())
    # A trait set on a root after the board was read reaches it at the next refresh.
    first = sorted(enabled)[0]
    traits = api.get(f"/resource_providers/{first}/traits").json_body
    assert (
        api.put(
            f"/resource_providers/{first}/traits",
            {
                "traits": ["COMPUTE_STATUS_DISABLED"],
                "resource_provider_generation": traits["resource_provider_generation"],
            },
        ).status_code
        == 200
    )
    _refresh(app, db)
    view = board.view
    trait = _trait_id(db, "COMPUTE_STATUS_DISABLED")
    allowed = view.roots_allowed((), frozenset({trait}))
    assert {int(r) for r, ok in zip(view.roots, allowed, strict=True) if ok} == {_id(db, u) for u in enabled - {first}}
    assert {_pick_enabled(api, "VCPU:1") for _ in range(3)} == enabled - {first}
    # A trait required at the root: only the trees whose root has it.
    assert {_pick_enabled(api, "VCPU:1", "COMPUTE_STATUS_DISABLED") for _ in range(3)} <= {disabled, first}


def test_nova_requests_for_a_zone_are_weighed_on_the_board_among_its_trees(api, app, db, board, monkeypatch):
    """A request naming aggregates (Nova's availability zone: ``member_of``) is weighed on the board
    too, among the trees with a provider in them: a root in the zone, or only a child of it; the
    emptiest host, in another zone, is never chosen."""
    zone, elsewhere = new_uuid(), new_uuid()
    outside = api.create_provider("outside", inventory={"VCPU": 64, "MEMORY_MB": 65536}, aggregates=[elsewhere])
    root_in_zone = api.create_provider("root-in-zone", inventory=HOST, aggregates=[zone])
    parent = api.create_provider("parent")
    api.create_provider("child-in-zone", parent=parent, inventory=HOST, aggregates=[zone])
    from berth.api.handlers.claims import pick

    plans = []
    plan_on_board = pick.plan_on_board
    monkeypatch.setattr(pick, "plan_on_board", lambda *args: plans.append(plan_on_board(*args)) or plans[-1])
    body = {
        "query": {"resources": "VCPU:1,MEMORY_MB:512", "member_of": f"in:{zone}"},
        "consumer": {"uuid": "", "project_id": "p", "user_id": "u", "consumer_type": "INSTANCE"},
    }
    chosen = []
    for _ in range(6):
        body["consumer"]["uuid"] = new_uuid()
        r = api.post("/berth/pick", body)
        assert r.status_code == 200, r.data
        chosen.append(r.json_body["root_provider_uuid"])
    # Each planned on the board (the full search of every tree not needed), among the zone's trees.
    assert len(plans) == 6 and all(plan is not None and len(plan.trees) <= 2 for plan in plans)
    assert set(chosen) == {root_in_zone, parent}
    assert not any(_usage(api, outside).values())
    # Two sets: a tree must meet both, so none here can; the board's path refuses as the search does.
    body["query"]["member_of"] = [f"in:{zone}", f"in:{elsewhere}"]
    body["consumer"]["uuid"] = new_uuid()
    assert api.post("/berth/pick", body).status_code == 409


def test_granular_requests_are_planned_on_the_board_and_searched_exactly(api, app, db, board, monkeypatch):
    """A request of a group per NUMA cell is planned on the board too: the board offers every tree
    with room for the most one group asks of each class, and the search of each tree it tries
    decides. The emptiest host, which has none of the cells' class, is never chosen."""
    from berth.api.handlers.claims import pick

    api.put("/resource_classes/CUSTOM_CELL_UNIT")
    roomy = api.create_provider("roomy", inventory={"VCPU": 64, "MEMORY_MB": 65536})
    two_cells = api.create_provider("two-cells", inventory={"MEMORY_MB": 8192})
    cells = [
        api.create_provider(f"cell-{i}", parent=two_cells, inventory={"VCPU": 4, "CUSTOM_CELL_UNIT": 2})
        for i in range(2)
    ]
    plans = []
    plan_on_board = pick.plan_on_board
    monkeypatch.setattr(pick, "plan_on_board", lambda *args: plans.append(plan_on_board(*args)) or plans[-1])
    query = {
        "resources": "MEMORY_MB:512",
        "resources1": "VCPU:1,CUSTOM_CELL_UNIT:1",
        "resources2": "VCPU:1,CUSTOM_CELL_UNIT:1",
        "group_policy": "none",
    }

    def picked(expect=200):
        body = {
            "query": query,
            "consumer": {"uuid": new_uuid(), "project_id": "p", "user_id": "u", "consumer_type": "INSTANCE"},
        }
        r = api.post("/berth/pick", body)
        assert r.status_code == expect, r.data
        return r.json_body

    # A group per cell on a provider of its own (``isolate``) is not planned on the board: most
    # hosts have one provider of each class, which the board cannot tell. It is placed by the
    # search of every tree, one unit on each cell.
    query["group_policy"] = "isolate"
    answer = picked()
    assert plans == [None] and answer["root_provider_uuid"] == two_cells
    allocations = answer["allocation_request"]["allocations"]
    assert [allocations[cell]["resources"]["CUSTOM_CELL_UNIT"] for cell in cells] == [1, 1]
    # Without isolate, planned on the board: only the tree with the cells' class is offered.
    query["group_policy"] = "none"
    answer = picked()
    assert answer["root_provider_uuid"] == two_cells
    allocations = answer["allocation_request"]["allocations"]
    assert sum(allocations[cell]["resources"]["CUSTOM_CELL_UNIT"] for cell in cells if cell in allocations) == 2
    assert plans[-1] is not None and len(plans[-1].trees) == 1
    assert not any(_usage(api, roomy).values())
    # The cells' units (2 each) all taken: none fits.
    picked(409)


def _trait_id(db, name):
    with db.engine.connect() as conn:
        return conn.execute(
            schema.traits.select().with_only_columns(schema.traits.c.id).where(schema.traits.c.name == name)
        ).scalar_one()


def _arrays(view):
    return (
        list(view.roots),
        list(view.ram),
        list(view.cpus),
        list(view.disk),
        {rc: list(column) for rc, column in view.room.items()},
    )


def test_a_pick_refused_at_its_commit_leaves_the_board_as_it_was(api, app, db, board):
    """A pick the quota refuses as its transaction commits wrote nothing: the board must not keep
    what it would have taken (a tree the refresh has no reason to read again would look fuller than
    it is until it next changed, and picks would pass it over)."""
    for i in range(2):
        api.create_provider(f"h{i}", inventory=HOST)
    _refresh(app, db)
    before = _arrays(board.view)
    assert api.put("/berth/quotas/p", {"limits": {"VCPU": 1}}).status_code == 200
    try:
        body = {
            "query": {"resources": "VCPU:2,MEMORY_MB:512"},
            "consumer": {"uuid": new_uuid(), "project_id": "p", "user_id": "u", "consumer_type": "INSTANCE"},
        }
        r = api.post("/berth/pick", body)
        assert r.status_code == 409 and r.json_body["errors"][0]["code"] == "berth.quota.exceeded", r.data
        assert _arrays(board.view) == before
        # Taken as it commits: a pick that lands is on the board at once.
        _pick(api, {"VCPU": 1, "MEMORY_MB": 512})
        after = _arrays(board.view)
        assert after != before and sum(after[2]) == sum(before[2]) - 1  # one VCPU off one tree
    finally:
        api.delete("/berth/quotas/p")


def test_a_refresh_reading_only_the_stretches_that_moved_sees_every_change(api, app, db, board, monkeypatch):
    hosts = [api.create_provider(f"h{i}", inventory=HOST) for i in range(400)]
    _refresh(app, db)
    whole = host_board._TREE_SIGNATURES
    # From here on a refresh may not read every tree's signature: only the stretches that moved.
    monkeypatch.setattr(host_board, "_TREE_SIGNATURES", "SELECT * FROM no_such_table")
    rng = random.Random(7)
    consumers = []
    for _ in range(12):
        kind = rng.choice(["allocate", "free", "add", "delete", "inventory"])
        if kind == "allocate" or (kind == "free" and not consumers):
            consumers.append(new_uuid())
            api.allocate(consumers[-1], {rng.choice(hosts): {"VCPU": 1, "MEMORY_MB": rng.randint(1, 512)}})
        elif kind == "free":
            assert api.delete(f"/allocations/{consumers.pop(rng.randrange(len(consumers)))}").status_code == 204
        elif kind == "add":
            hosts.append(api.create_provider(f"n{len(hosts)}", inventory=HOST))
        elif kind == "delete":
            held = {rp for c in consumers for rp in api.get(f"/allocations/{c}").json_body["allocations"]}
            gone = rng.choice([h for h in hosts if h not in held])
            assert api.delete(f"/resource_providers/{gone}").status_code == 204
            hosts.remove(gone)
        else:
            host = rng.choice(hosts)
            generation = api.get(f"/resource_providers/{host}").json_body["generation"]
            body = {"resource_provider_generation": generation, "inventories": {"VCPU": {"total": rng.randint(8, 16)}}}
            assert api.put(f"/resource_providers/{host}/inventories", body).status_code == 200
        _refresh(app, db)
        fresh = HostBoard(min_age=math.inf)
        with monkeypatch.context() as first_read:
            first_read.setattr(host_board, "_TREE_SIGNATURES", whole)
            db.read(lambda conn, fresh=fresh: fresh.refresh(conn, app.provider_cache, force=True))
        assert _arrays(board.view) == _arrays(fresh.view), kind


def test_without_the_board_a_pick_weighs_the_books_as_they_stand(db):
    """``pick_board`` off: a tree this worker just claimed on, then freed, weighs as free at once;
    on, the board counts the claim until its next read and the next pick goes elsewhere."""
    picked = {}
    for pick_board in (True, False):
        app = PlacementApp(db, Settings(pick_board=pick_board))
        assert app.host_board.enabled is pick_board
        if pick_board:
            app.host_board = HostBoard(min_age=math.inf)  # no read but the first: behind the books
        api = Api(app)
        reset(db)
        big = api.create_provider("big", inventory={"VCPU": 8, "MEMORY_MB": 32768})
        api.create_provider("small", inventory={"VCPU": 8, "MEMORY_MB": 24576})
        picks = []
        for _ in range(2):
            consumer = new_uuid()
            body = {
                "query": {"resources": "VCPU:1,MEMORY_MB:20000"},
                "consumer": {"uuid": consumer, "project_id": "p", "user_id": "u", "consumer_type": "INSTANCE"},
            }
            answer = api.post("/berth/pick", body).json_body
            picks.append(answer["root_provider_uuid"] == big)
            assert api.delete(f"/allocations/{consumer}").status_code == 204
        picked[pick_board] = picks
    assert picked[False] == [True, True]
    assert picked[True] == [True, False]


def test_the_trees_a_sharing_provider_serves_are_those_of_its_aggregates_but_its_own_and_kept():
    roots = np.array([10, 11, 12, 13], dtype=np.int64)
    empty = np.zeros(4)
    view = host_board.BoardView(
        roots=roots,
        index_of={10: 0, 11: 1, 12: 2, 13: 3},
        room={},
        ram=empty,
        cpus=empty,
        disk=empty,
        by_aggregate={1: np.array([0, 1], dtype=np.intp), 2: np.array([1, 3], dtype=np.intp)},
        by_root_trait={},
    )
    served = view.anchored(frozenset({1, 2}), own_root=13)
    assert served.tolist() == [0, 1]
    assert view.anchored(frozenset({1, 2}), own_root=13) is served  # worked out once per view
    assert view.anchored(frozenset({2}), own_root=99).tolist() == [1, 3]
    assert view.anchored(frozenset({7}), own_root=10).tolist() == []


def test_a_view_keeps_a_bounded_number_of_derived_arrays():
    view = host_board.BoardView(
        roots=np.array([10], dtype=np.int64),
        index_of={10: 0},
        room={},
        ram=np.zeros(1),
        cpus=np.zeros(1),
        disk=np.zeros(1),
        by_aggregate={},
        by_root_trait={},
    )
    made = []

    def make():
        made.append(1)
        return np.zeros(1)

    first = view.derived(("free disk", 0), make)
    assert view.derived(("free disk", 0), make) is first and len(made) == 1  # made once
    for amount in range(1, 10 * host_board.MOST_DERIVED):
        view.derived(("free disk", amount), make)
    assert len(view._derived) <= host_board.MOST_DERIVED


def _pick_with_alternates(api):
    body = {
        "query": {"resources": "VCPU:1"},
        "consumer": {"uuid": new_uuid(), "project_id": "p", "user_id": "u", "consumer_type": "INSTANCE"},
        "alternates": 4,
    }
    r = api.post("/berth/pick", body)
    assert r.status_code == 200, r.data
    return {r.json_body["root_provider_uuid"]} | {a["root_provider_uuid"] for a in r.json_body["alternates"]}


def test_the_first_pick_after_a_quiet_spell_has_the_board_read_again_first(api, app, db, monkeypatch):
    # Its thread reads the board at once, then (no pick reading it) not again within the test
    # unless a pick wakes it.
    monkeypatch.setattr(host_board, "UNUSED_REFRESH_SECONDS", 3600.0)
    monkeypatch.setattr(host_board, "UNUSED_STALEST_SECONDS", 3600.0)
    # Long enough for any read of a board this size, however busy the machine.
    monkeypatch.setattr(host_board, "QUIET_WAIT_SECONDS", 30.0)
    board = app.host_board = HostBoard(min_age=0.05)
    hosts = {api.create_provider("h0", inventory=HOST)}
    board.refresh_in_background(db, app.provider_cache)
    try:
        assert board._first_read.wait(10)
        added = api.create_provider("h1", inventory=HOST)
        hosts.add(added)
        time.sleep(board._age_needed)
        assert _id(db, added) not in board.view.index_of
        # No pick read it yet, and older than a busy board gets: read again before the pick, which
        # names both hosts.
        assert _pick_with_alternates(api) == hosts
    finally:
        board.stop_refreshing()


def test_a_board_read_while_the_database_is_away_is_said_in_a_line(caplog):
    """A PostgreSQL restarting or failing over: the board's thread says so in one warning, not with
    a traceback (which would read as a defect), and goes on."""
    away = Database(f"postgresql+psycopg://berth@127.0.0.1:{free_port()}/berth")
    try:
        with caplog.at_level("WARNING", logger=host_board.__name__):
            assert HostBoard()._read_or_say_why(away, ProviderCache(), force=True) is False
    finally:
        away.dispose()
    [said] = [r for r in caplog.records if r.name == host_board.__name__]
    assert said.levelname == "WARNING" and said.exc_info is None
    assert "reading the host board failed" in said.getMessage() and "unreachable" in said.getMessage()
