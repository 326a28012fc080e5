"""GET /allocation_candidates: groups, trees, sharing providers and the shapes of every version."""

import pytest
from apihelpers import error_detail, new_uuid

from berth.store.candidates import roots

COMPUTE = {"VCPU": 8, "MEMORY_MB": 4096, "DISK_GB": 100}


@pytest.fixture(autouse=True, params=["narrowed", "walk"])
def search_path(request, monkeypatch):
    """Every answer here twice: with the trees a rare condition names (the way a small cloud is
    always searched), and walking every tree (the way a large cloud is, for wide conditions)."""
    if request.param == "walk":
        monkeypatch.setattr(roots, "SMALLEST_BOUND", 0)
        monkeypatch.setattr(roots, "LARGEST_BOUND", 0)
    roots.forget_wide_hints()
    yield request.param
    roots.forget_wide_hints()


def _ac(api, query, version="latest", expect=200):
    r = api.get(f"/allocation_candidates?{query}", version=version)
    assert r.status_code == expect, r.data
    return r.json_body


def _allocs(body):
    """Allocation requests as sorted tuples of (provider, class, amount)."""
    return sorted(
        tuple(sorted((rp, rc, n) for rp, entry in ar["allocations"].items() for rc, n in entry["resources"].items()))
        for ar in body["allocation_requests"]
    )


def _norm(requests):
    return sorted(tuple(sorted(r)) for r in requests)


def test_single_providers_with_capacity(api):
    a = api.create_provider("a", inventory=COMPUTE)
    b = api.create_provider("b", inventory=COMPUTE)
    full = api.create_provider("full", inventory={"VCPU": 1, "MEMORY_MB": 4096})
    api.create_provider("nomem", inventory={"VCPU": 8})
    body = _ac(api, "resources=VCPU:2,MEMORY_MB:1024")
    assert _allocs(body) == _norm([((a, "MEMORY_MB", 1024), (a, "VCPU", 2)), ((b, "MEMORY_MB", 1024), (b, "VCPU", 2))])
    assert full not in body["provider_summaries"]
    summary = body["provider_summaries"][a]
    assert summary["resources"]["VCPU"] == {"capacity": 8, "used": 0}
    assert summary["resources"]["DISK_GB"] == {"capacity": 100, "used": 0}
    assert summary["root_provider_uuid"] == a and summary["parent_provider_uuid"] is None
    assert summary["traits"] == []


def test_response_shapes_by_version(api):
    a = api.create_provider("a", inventory=COMPUTE)
    body = _ac(api, "resources=VCPU:1", version="1.10")
    assert body["allocation_requests"] == [
        {"allocations": [{"resource_provider": {"uuid": a}, "resources": {"VCPU": 1}}]}
    ]
    assert body["provider_summaries"][a] == {"resources": {"VCPU": {"capacity": 8, "used": 0}}}
    body = _ac(api, "resources=VCPU:1", version="1.12")
    assert body["allocation_requests"] == [{"allocations": {a: {"resources": {"VCPU": 1}}}}]
    body = _ac(api, "resources=VCPU:1", version="1.34")
    assert body["allocation_requests"][0]["mappings"] == {"": [a]}
    assert _ac(api, "resources=VCPU:1", version="1.9", expect=404) is not None


def test_limit_and_usage_and_unit_constraints(api):
    for i in range(5):
        api.create_provider(f"h{i}", inventory={"VCPU": {"total": 4, "max_unit": 2}})
    assert len(_ac(api, "resources=VCPU:1&limit=3")["allocation_requests"]) == 3
    assert len(_ac(api, "resources=VCPU:3")["allocation_requests"]) == 0
    _ac(api, "resources=VCPU:1&limit=3", version="1.15", expect=400)
    _ac(api, "resources=VCPU:1&limit=0", expect=400)


def test_required_and_forbidden_traits(api):
    avx = api.create_provider("avx", inventory=COMPUTE, traits=["HW_CPU_X86_AVX"])
    plain = api.create_provider("plain", inventory=COMPUTE)
    assert _allocs(_ac(api, "resources=VCPU:1&required=HW_CPU_X86_AVX")) == _norm([((avx, "VCPU", 1),)])
    assert _allocs(_ac(api, "resources=VCPU:1&required=!HW_CPU_X86_AVX")) == _norm([((plain, "VCPU", 1),)])
    _ac(api, "resources=VCPU:1&required=!HW_CPU_X86_AVX", version="1.21", expect=400)
    r = api.get("/allocation_candidates?resources=VCPU:1&required=CUSTOM_NOPE")
    assert r.status_code == 400 and "No such trait(s)" in error_detail(r)


def test_member_of(api):
    agg = new_uuid()
    inside = api.create_provider("in", inventory=COMPUTE, aggregates=[agg])
    outside = api.create_provider("out", inventory=COMPUTE)
    assert _allocs(_ac(api, f"resources=VCPU:1&member_of={agg}")) == _norm([((inside, "VCPU", 1),)])
    assert _allocs(_ac(api, f"resources=VCPU:1&member_of=!{agg}")) == _norm([((outside, "VCPU", 1),)])


def _split_membership_tree(api):
    """A root in aggregate A with a child in B (serving VCPU), and a child in both A and B."""
    agg_a, agg_b, agg_c = new_uuid(), new_uuid(), new_uuid()
    root = api.create_provider("cn", inventory={"MEMORY_MB": 4096}, aggregates=[agg_a])
    in_b = api.create_provider("numa-b", parent=root, inventory={"VCPU": 4}, aggregates=[agg_b])
    in_both = api.create_provider("numa-ab", parent=root, inventory={"VCPU": 4}, aggregates=[agg_a, agg_b, agg_c])
    return agg_a, agg_b, agg_c, root, in_b, in_both


@pytest.mark.parametrize(
    ("query", "served_by"),
    [
        # One member_of met by the child and another by its root is not enough: each provider of
        # the answer, or its root, must be in every one.
        ("resources=VCPU:1&member_of={a}&member_of={b}", ["in_both"]),
        ("resources=VCPU:1&member_of={b}&member_of=in:{a},{c}", ["in_both"]),
        # Its root in A meets in:A,B for the child in B alone.
        ("resources=VCPU:1&member_of=in:{a},{b}", ["in_b", "in_both"]),
        ("resources=VCPU:1&member_of={a}", ["in_b", "in_both"]),
        ("resources=VCPU:1&member_of={a}&member_of=!{c}", ["in_b"]),
        # A suffixed group's provider must be in every aggregate itself; its root does not count.
        ("resources1=VCPU:1&member_of1={a}&member_of1={b}", ["in_both"]),
        ("resources1=VCPU:1&member_of1={a}", ["in_both"]),
        ("resources1=VCPU:1&member_of1=in:{a},{b}&member_of1=!{c}", ["in_b"]),
    ],
)
def test_several_member_of_must_be_met_by_the_provider_or_by_its_root(api, query, served_by):
    agg_a, agg_b, agg_c, _, in_b, in_both = _split_membership_tree(api)
    providers = {"in_b": in_b, "in_both": in_both}
    body = _ac(api, query.format(a=agg_a, b=agg_b, c=agg_c))
    assert _allocs(body) == _norm([((providers[name], "VCPU", 1),) for name in served_by])


def test_explain_counts_member_of_as_the_search_does(api):
    agg_a, agg_b, agg_c, *_ = _split_membership_tree(api)
    r = api.get(f"/berth/allocation_candidates/explain?resources=VCPU:1&member_of={agg_a}&member_of={agg_b}")
    assert r.status_code == 200, r.data
    steps = [(c["kind"], c["remaining"], c["alone"]) for c in r.json_body["groups"][0]["conditions"]]
    # Where to look comes first, then what must be found there. The child in B only is out at the
    # second member_of: its root is in A, not in B.
    assert steps == [
        ("aggregates", 3, 3),
        ("aggregates", 1, 1),
        ("inventory", 1, 2),
        ("capacity", 1, 2),
        ("units", 1, 2),
    ]
    assert r.json_body["candidates"] == 1
    r = api.get(f"/berth/allocation_candidates/explain?resources1=VCPU:1&member_of1={agg_a}&member_of1=!{agg_c}")
    steps = [(c["kind"], c["remaining"], c["alone"]) for c in r.json_body["groups"][0]["conditions"]]
    # Only the root is in A and not in C, and it has no VCPU: the providers with VCPU are elsewhere.
    assert steps == [
        ("aggregates", 2, 2),
        ("aggregates", 1, 2),
        ("inventory", 0, 2),
        ("capacity", 0, 2),
        ("units", 0, 2),
    ]
    assert r.json_body["candidates"] == 0


def test_nested_children_serve_the_unsuffixed_group(api):
    root = api.create_provider("cn", inventory={"MEMORY_MB": 4096})
    numa0 = api.create_provider("numa0", parent=root, inventory={"VCPU": 4})
    numa1 = api.create_provider("numa1", parent=root, inventory={"VCPU": 4})
    body = _ac(api, "resources=VCPU:2,MEMORY_MB:512")
    assert _allocs(body) == _norm(
        [((numa0, "VCPU", 2), (root, "MEMORY_MB", 512)), ((numa1, "VCPU", 2), (root, "MEMORY_MB", 512))]
    )
    assert set(body["provider_summaries"]) == {root, numa0, numa1}
    assert body["provider_summaries"][numa0]["parent_provider_uuid"] == root


def test_sharing_provider_serves_disk(api):
    agg = new_uuid()
    cn = api.create_provider("cn", inventory={"VCPU": 8}, aggregates=[agg])
    lonely = api.create_provider("lonely", inventory={"VCPU": 8})
    share = api.create_provider(
        "nfs", inventory={"DISK_GB": 1000}, aggregates=[agg], traits=["MISC_SHARES_VIA_AGGREGATE"]
    )
    body = _ac(api, "resources=VCPU:1,DISK_GB:100")
    assert _allocs(body) == _norm([((cn, "VCPU", 1), (share, "DISK_GB", 100))])
    assert lonely not in body["provider_summaries"]
    assert share in body["provider_summaries"]
    body = _ac(api, "resources=DISK_GB:100")
    assert _allocs(body) == _norm([((share, "DISK_GB", 100),)])


def test_granular_groups_and_isolation(api):
    cn = api.create_provider("cn", inventory={"VCPU": 8})
    pf1 = api.create_provider("pf1", parent=cn, inventory={"SRIOV_NET_VF": 4})
    pf2 = api.create_provider("pf2", parent=cn, inventory={"SRIOV_NET_VF": 4})
    query = "resources=VCPU:1&resources1=SRIOV_NET_VF:1&resources2=SRIOV_NET_VF:1"
    _ac(api, query, expect=400)  # group_policy is required with several groups
    body = _ac(api, query + "&group_policy=isolate")
    assert _allocs(body) == _norm(
        [
            ((cn, "VCPU", 1), (pf1, "SRIOV_NET_VF", 1), (pf2, "SRIOV_NET_VF", 1)),
            ((cn, "VCPU", 1), (pf1, "SRIOV_NET_VF", 1), (pf2, "SRIOV_NET_VF", 1)),
        ]
    )
    mappings = sorted((ar["mappings"]["1"], ar["mappings"]["2"]) for ar in body["allocation_requests"])
    assert mappings == sorted([([pf1], [pf2]), ([pf2], [pf1])])
    body = _ac(api, query + "&group_policy=none")
    assert _norm([((cn, "VCPU", 1), (pf1, "SRIOV_NET_VF", 2))])[0] in _allocs(body)
    assert len(body["allocation_requests"]) == 4


def test_amounts_of_several_groups_on_one_provider_must_fit_together(api):
    cn = api.create_provider("cn", inventory={"MEMORY_MB": 1024})
    numa = api.create_provider("numa", parent=cn, inventory={"VCPU": 10})
    body = _ac(api, "resources=VCPU:6&resources_NUMA=VCPU:6&group_policy=none")
    assert body["allocation_requests"] == []
    body = _ac(api, "resources=VCPU:4&resources_NUMA=VCPU:6&group_policy=none")
    assert _allocs(body) == _norm([((numa, "VCPU", 10),)])


def test_wide_symmetric_tree_with_isolate_is_capped_and_correct(api):
    cn = api.create_provider("cn", inventory={"VCPU": 8})
    pfs = [api.create_provider(f"pf{i}", parent=cn, inventory={"SRIOV_NET_VF": 1}) for i in range(8)]
    groups = "&".join(f"resources{i}=SRIOV_NET_VF:1" for i in range(1, 9))
    body = _ac(api, f"resources=VCPU:1&{groups}&group_policy=isolate&limit=20")
    assert len(body["allocation_requests"]) == 20
    for ar in body["allocation_requests"]:
        assert sorted(ar["allocations"]) == sorted(pfs + [cn])
        assert sorted(p for ps in ar["mappings"].values() for p in ps) == sorted(pfs + [cn])


def test_in_tree_root_required_and_same_subtree(api):
    cn1 = api.create_provider("cn1", inventory={"VCPU": 8}, traits=["COMPUTE_STATUS_DISABLED"])
    cn2 = api.create_provider("cn2", inventory={"VCPU": 8})
    assert _allocs(_ac(api, f"resources=VCPU:1&in_tree={cn1}")) == _norm([((cn1, "VCPU", 1),)])
    assert _allocs(_ac(api, "resources=VCPU:1&root_required=!COMPUTE_STATUS_DISABLED")) == _norm([((cn2, "VCPU", 1),)])
    numa0 = api.create_provider("numa0", parent=cn2)
    numa1 = api.create_provider("numa1", parent=cn2)
    pf0 = api.create_provider("pf0", parent=numa0, inventory={"SRIOV_NET_VF": 2})
    api.put("/traits/CUSTOM_PHYSNET1")
    api.create_provider("pf1", parent=numa1, inventory={"SRIOV_NET_VF": 2})
    gen = api.get(f"/resource_providers/{numa0}").json_body["generation"]
    api.put(f"/resource_providers/{numa0}/traits", {"traits": ["HW_NUMA_ROOT"], "resource_provider_generation": gen})
    body = _ac(api, "resources_VF=SRIOV_NET_VF:1&required_NUMA=HW_NUMA_ROOT&same_subtree=_VF,_NUMA&group_policy=none")
    assert _allocs(body) == _norm([((pf0, "SRIOV_NET_VF", 1),)])
    assert body["allocation_requests"][0]["mappings"] == {"_VF": [pf0], "_NUMA": [numa0]}
    _ac(api, "resources_VF=SRIOV_NET_VF:1&required_NUMA=HW_NUMA_ROOT&group_policy=none", version="1.35", expect=400)


@pytest.mark.parametrize(
    "query",
    [
        "",
        "resources=VCPU",
        "resources=VCPU:1&foo=bar",
        "resources=CUSTOM_NOPE:1",
        "resources=VCPU:1&group_policy=bogus",
        "resources=VCPU:1&same_subtree=_X",
        "resources=VCPU:1&member_of=notauuid",
    ],
)
def test_bad_queries_are_400(api, query):
    _ac(api, query, expect=400)


def test_explain_counts_what_each_condition_excluded(api):
    agg = new_uuid()
    api.create_provider("small", inventory={"VCPU": 1})
    api.create_provider("big-plain", inventory={"VCPU": 16})
    api.create_provider("big-avx", inventory={"VCPU": 16}, traits=["HW_CPU_X86_AVX"])
    api.create_provider("no-cpu", inventory={"DISK_GB": 10})
    r = api.get(f"/berth/allocation_candidates/explain?resources=VCPU:4&required=HW_CPU_X86_AVX&member_of={agg}")
    assert r.status_code == 200, r.data
    report = r.json_body
    assert report["providers"] == 4 and report["candidates"] == 0
    steps = [(c["kind"], c["excluded"], c["remaining"], c["alone"]) for c in report["groups"][0]["conditions"]]
    # No provider is in the aggregate, and the step says so: none meets it even alone.
    assert steps == [
        ("aggregates", 4, 0, 0),
        ("traits", 0, 0, 1),
        ("inventory", 0, 0, 3),
        ("capacity", 0, 0, 2),
        ("units", 0, 0, 3),
    ]
    r = api.get("/berth/allocation_candidates/explain?resources=VCPU:4&required=HW_CPU_X86_AVX")
    assert r.json_body["candidates"] == 1
    steps = [(c["kind"], c["excluded"], c["remaining"], c["alone"]) for c in r.json_body["groups"][0]["conditions"]]
    assert steps == [("traits", 3, 1, 1), ("inventory", 0, 1, 3), ("capacity", 0, 1, 2), ("units", 0, 1, 3)]


def test_sharing_provider_with_nested_tree(api):
    agg = new_uuid()
    cn = api.create_provider("cn", inventory={"MEMORY_MB": 4096}, aggregates=[agg])
    numa = api.create_provider("numa", parent=cn, inventory={"VCPU": 4})
    share = api.create_provider(
        "nfs", inventory={"DISK_GB": 100}, aggregates=[agg], traits=["MISC_SHARES_VIA_AGGREGATE"]
    )
    body = _ac(api, "resources=VCPU:1,MEMORY_MB:64,DISK_GB:10")
    assert _allocs(body) == _norm([((numa, "VCPU", 1), (cn, "MEMORY_MB", 64), (share, "DISK_GB", 10))])
    assert set(body["provider_summaries"]) == {cn, numa, share}
    # A granular group may be served by the sharing provider too.
    body = _ac(api, "resources=VCPU:1&resources_DISK=DISK_GB:10&group_policy=isolate")
    assert body["allocation_requests"][0]["mappings"]["_DISK"] == [share]


def test_capacity_at_the_exact_limit(api):
    rp = api.create_provider("p", inventory={"VCPU": {"total": 10, "reserved": 2, "allocation_ratio": 1.5}})
    api.allocate(new_uuid(), {rp: {"VCPU": 10}})
    assert len(_ac(api, "resources=VCPU:2")["allocation_requests"]) == 1
    assert _ac(api, "resources=VCPU:3")["allocation_requests"] == []
    assert _ac(api, "resources=VCPU:2")["provider_summaries"][rp]["resources"]["VCPU"] == {"capacity": 12, "used": 10}


@pytest.mark.parametrize(
    "query,first",
    [
        ("resources=VCPU:1&required=HW_CPU_X86_AVX", "1.17"),
        ("resources=VCPU:1&member_of={agg}", "1.21"),
        ("resources=VCPU:1&in_tree={rp}", "1.31"),
        ("resources=VCPU:1&root_required=HW_CPU_X86_AVX", "1.35"),
        ("resources=VCPU:1&required=in:HW_CPU_X86_AVX,HW_CPU_X86_SSE", "1.39"),
        ("resources1=VCPU:1", "1.25"),
        ("resources_A=VCPU:1", "1.33"),
    ],
)
def test_parameters_at_their_microversion_boundary(api, query, first):
    agg = new_uuid()
    rp = api.create_provider("p", inventory=COMPUTE, traits=["HW_CPU_X86_AVX"], aggregates=[agg])
    query = query.format(agg=agg, rp=rp)
    major, minor = first.split(".")
    _ac(api, query, version=f"{major}.{int(minor) - 1}", expect=400)
    assert len(_ac(api, query, version=first)["allocation_requests"]) == 1


def test_random_order_returns_the_same_set(db, api):
    from berth.api.app import PlacementApp, Settings

    ordered = api
    shuffled = type(api)(PlacementApp(db, Settings(randomize_candidates=True)))
    hosts = {ordered.create_provider(f"h{i}", inventory=COMPUTE) for i in range(12)}
    expected = {p for ar in _ac(ordered, "resources=VCPU:1")["allocation_requests"] for p in ar["allocations"]}
    assert expected == hosts
    seen_first = set()
    for _ in range(8):
        body = _ac(shuffled, "resources=VCPU:1")
        got = [p for ar in body["allocation_requests"] for p in ar["allocations"]]
        assert set(got) == hosts and len(got) == len(hosts)
        seen_first.add(got[0])
        limited = _ac(shuffled, "resources=VCPU:1&limit=3")["allocation_requests"]
        assert len(limited) == 3
    assert len(seen_first) > 1


@pytest.mark.parametrize("fitting", [[0, 2, 3], [0, 9]], ids=["dense", "sparse"])
def test_only_trees_of_fitting_roots_are_summarised(api, fitting):
    """Trees are loaded by ranges of root ids where the fitting roots lie close together, and by
    list otherwise: either way, trees whose roots have no room stay out of the answer."""
    hosts = [api.create_provider(f"host-{n}", inventory={"VCPU": 4 if n in fitting else 1}) for n in range(10)]
    for n, host in enumerate(hosts):
        api.create_provider(f"host-{n}-child", parent=host, inventory={"VGPU": 1})
    body = api.get("/allocation_candidates?resources=VCPU:2").json_body
    assert [list(r["allocations"]) for r in body["allocation_requests"]] == [[hosts[n]] for n in fitting]
    roots = {s["root_provider_uuid"] for s in body["provider_summaries"].values()}
    assert roots == {hosts[n] for n in fitting}
    assert len(body["provider_summaries"]) == 2 * len(fitting)
