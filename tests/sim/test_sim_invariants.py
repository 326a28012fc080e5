"""The invariant checker on hand-made books: clean books pass, and each broken invariant is found,
naming the consumer and provider concerned."""

from __future__ import annotations

import copy

import pytest

from berth.testbed.sim.checks.invariants import Books, Expected, LiveInstance, Provider, check

HOST_A, HOST_B = "host-a", "host-b"
ROOT_A, CELL_A, ROOT_B, POOL = "rp-a", "rp-a-numa0", "rp-b", "rp-pool"
VM, OLD_VM, MOVED, MIGRATION, GONE, ENDED = "vm-1", "vm-2", "vm-3", "mig-3", "vm-gone", "mig-ended"
VICTIM = "vm-preempted"
SMALL = {"VCPU": 1, "MEMORY_MB": 512}


def clean_books() -> tuple[Books, Expected]:
    """VM on host A, OLD_VM on host B with its disk on the pool, MOVED resized from A to B (in flight)."""
    providers = {
        ROOT_A: Provider(ROOT_A, HOST_A, {"VCPU": 8, "MEMORY_MB": 4096}, {"VCPU": 2, "MEMORY_MB": 1024}),
        CELL_A: Provider(CELL_A, f"{HOST_A}_NUMA0", {}, {}),
        ROOT_B: Provider(ROOT_B, HOST_B, {"VCPU": 8, "MEMORY_MB": 4096}, {"VCPU": 3, "MEMORY_MB": 1536}),
        POOL: Provider(POOL, "pool", {"DISK_GB": 100}, {"DISK_GB": 5}),
    }
    allocations = {
        VM: {ROOT_A: dict(SMALL)},
        OLD_VM: {ROOT_B: dict(SMALL), POOL: {"DISK_GB": 5}},
        MOVED: {ROOT_B: {"VCPU": 2, "MEMORY_MB": 1024}},
        MIGRATION: {ROOT_A: dict(SMALL)},
    }
    books = Books(
        providers,
        allocations,
        trees={HOST_A: {ROOT_A, CELL_A}, HOST_B: {ROOT_B}},
        shared={HOST_A: set(), HOST_B: {POOL}},
        claims={
            HOST_A: {VM: {ROOT_A: dict(SMALL)}, MIGRATION: {ROOT_A: dict(SMALL)}},
            HOST_B: {
                OLD_VM: {ROOT_B: dict(SMALL), POOL: {"DISK_GB": 5}},
                MOVED: {ROOT_B: {"VCPU": 2, "MEMORY_MB": 1024}},
            },
        },
    )
    expected = Expected(
        live={
            VM: LiveInstance(HOST_A, dict(SMALL)),
            OLD_VM: LiveInstance(HOST_B, {**SMALL, "DISK_GB": 5}),
            MOVED: LiveInstance(
                HOST_B, {"VCPU": 2, "MEMORY_MB": 1024}, migration=MIGRATION, source=HOST_A, old_resources=dict(SMALL)
            ),
        },
        gone={GONE},
        ended_migrations={ENDED},
        anti_affinity={"group-1": [VM, OLD_VM]},
        preempted={VICTIM},
        vcpu_limit=5,
    )
    return books, expected


def broken(invariant_break):
    books, expected = clean_books()
    books, expected = copy.deepcopy(books), copy.deepcopy(expected)
    invariant_break(books, expected)
    return check(books, expected)


def test_clean_books_pass_every_check():
    verdict = check(*clean_books())
    assert verdict.violations == []
    assert set(verdict.checks) == {
        "over_capacity",
        "usage_mismatch",
        "instance_allocations",
        "migration_allocations",
        "gone_allocations",
        "claims_mismatch",
        "anti_affinity",
        "preempted_gone",
        "quota",
    }


def _over_capacity(books, expected):
    books.providers[ROOT_A] = Provider(ROOT_A, HOST_A, {"VCPU": 1, "MEMORY_MB": 4096}, {"VCPU": 2, "MEMORY_MB": 1024})


def _usage_off(books, expected):
    books.providers[ROOT_B] = Provider(ROOT_B, HOST_B, {"VCPU": 8, "MEMORY_MB": 4096}, {"VCPU": 4, "MEMORY_MB": 1536})


def _instance_short(books, expected):
    books.allocations[VM] = {ROOT_A: {"VCPU": 1}}
    books.claims[HOST_A][VM] = {ROOT_A: {"VCPU": 1}}
    books.providers[ROOT_A] = Provider(ROOT_A, HOST_A, {"VCPU": 8, "MEMORY_MB": 4096}, {"VCPU": 2, "MEMORY_MB": 512})


def _instance_elsewhere(books, expected):
    expected.live[VM] = LiveInstance(HOST_B, dict(SMALL))


def _migration_left(books, expected):
    books.allocations[ENDED] = {ROOT_B: {"VCPU": 1}}
    books.claims[HOST_B][ENDED] = {ROOT_B: {"VCPU": 1}}
    books.providers[ROOT_B] = Provider(ROOT_B, HOST_B, {"VCPU": 8, "MEMORY_MB": 4096}, {"VCPU": 4, "MEMORY_MB": 1536})


def _migration_missing(books, expected):
    del books.allocations[MIGRATION]
    del books.claims[HOST_A][MIGRATION]
    books.providers[ROOT_A] = Provider(ROOT_A, HOST_A, {"VCPU": 8, "MEMORY_MB": 4096}, dict(SMALL))


def _gone_holds(books, expected):
    books.allocations[GONE] = {POOL: {"DISK_GB": 1}}
    books.providers[POOL] = Provider(POOL, "pool", {"DISK_GB": 100}, {"DISK_GB": 6})


def _claim_missing(books, expected):
    del books.claims[HOST_A][VM]


def _claim_differs(books, expected):
    books.claims[HOST_B][MOVED] = {ROOT_B: {"VCPU": 1, "MEMORY_MB": 1024}}


def _group_together(books, expected):
    expected.anti_affinity["group-1"] = [VM, MOVED]
    books.allocations[MOVED] = {ROOT_A: {"VCPU": 2, "MEMORY_MB": 1024}}


def _over_quota(books, expected):
    expected.vcpu_limit = 3  # the instances hold 4 VCPUs (the move in flight's migration 1 more)


def _victim_holds(books, expected):
    books.allocations[VICTIM] = {ROOT_B: {"VCPU": 1}}
    books.providers[ROOT_B] = Provider(ROOT_B, HOST_B, {"VCPU": 8, "MEMORY_MB": 4096}, {"VCPU": 4, "MEMORY_MB": 1536})


def _victim_claimed(books, expected):
    books.claims[HOST_A][VICTIM] = {ROOT_A: dict(SMALL)}


def _victim_running(books, expected):
    expected.preempted_running = {VICTIM}


@pytest.mark.parametrize(
    ("breaking", "invariant", "consumer", "provider"),
    [
        (_over_capacity, "over_capacity", None, ROOT_A),
        (_usage_off, "usage_mismatch", None, ROOT_B),
        (_instance_short, "instance_allocations", VM, ROOT_A),
        (_instance_elsewhere, "instance_allocations", VM, ROOT_A),
        (_migration_left, "migration_allocations", ENDED, ROOT_B),
        (_migration_missing, "migration_allocations", MIGRATION, None),
        (_gone_holds, "gone_allocations", GONE, POOL),
        (_claim_missing, "claims_mismatch", VM, ROOT_A),
        (_claim_differs, "claims_mismatch", MOVED, ROOT_B),
        (_group_together, "anti_affinity", MOVED, None),
        (_over_quota, "quota", None, None),
        (_victim_holds, "preempted_gone", VICTIM, ROOT_B),
        (_victim_claimed, "preempted_gone", VICTIM, None),
        (_victim_running, "preempted_gone", VICTIM, None),
    ],
)
def test_each_broken_invariant_is_found(breaking, invariant, consumer, provider):
    verdict = broken(breaking)
    found = [v for v in verdict.violations if v.invariant == invariant]
    assert found, verdict.violations
    assert (found[0].consumer, found[0].provider) == (consumer, provider)


def test_a_move_in_flight_holds_its_instance_twice_within_the_quota():
    """A migration is never refused by the quota (docs/pick-and-claim.md, "Moves and quotas"): its
    migration consumer's VCPU, the instance's second, is not counted against the limit."""

    def at_the_instances_usage(books, expected):
        expected.vcpu_limit = 4  # the instances' 4, and 1 more held by the migration

    assert [v for v in broken(at_the_instances_usage).violations if v.invariant == "quota"] == []
