"""Cases where a client could tell Berth from OpenStack Placement, found by running real clients'
own tests against Berth: generations after a write, and the texts clients match on or show."""

from __future__ import annotations

import pytest
from apihelpers import SERVICE_HEADERS, error_code, error_detail, new_uuid
from werkzeug.test import Client

_AGGREGATE = "0b9e2a4c-1f6d-4c1e-9a57-3d2f8e7b6a51"
_TREE = "6d1c8e2a-5b7f-4e3d-8c9a-1f2e3d4c5b6a"


def _generation(api, uuid):
    return api.get(f"/resource_providers/{uuid}").json_body["generation"]


def _message(response):
    """The detail's own message, after the status title that Placement (webob) puts first."""
    return error_detail(response).split("\n\n", 1)[-1].strip()


def _consumer_generation(api, consumer):
    return api.get(f"/allocations/{consumer}").json_body["consumer_generation"]


# --- generations --------------------------------------------------------------------------------


def test_emptying_a_consumer_moves_each_providers_generation_once(api):
    host = api.create_provider("host", inventory={"VCPU": 8, "MEMORY_MB": 1024})
    disk = api.create_provider("disk", inventory={"DISK_GB": 100})
    consumer = new_uuid()
    api.allocate(consumer, {host: {"VCPU": 2, "MEMORY_MB": 256}, disk: {"DISK_GB": 10}})
    before = {rp: _generation(api, rp) for rp in (host, disk)}

    r = api.put(
        f"/allocations/{consumer}",
        {
            "allocations": {},
            "consumer_generation": _consumer_generation(api, consumer),
            "project_id": "proj",
            "user_id": "user",
        },
        version="1.28",
    )

    assert r.status_code == 204, r.data
    assert {rp: _generation(api, rp) for rp in (host, disk)} == {rp: g + 1 for rp, g in before.items()}
    assert api.get(f"/resource_providers/{host}/usages").json_body["usages"] == {"VCPU": 0, "MEMORY_MB": 0}


def test_a_provider_left_and_taken_in_one_write_moves_once(api):
    # A revert as Nova writes it: the migration's allocations emptied, the instance's put back on the
    # same host, in one POST /allocations.
    host = api.create_provider("host", inventory={"VCPU": 8})
    instance, migration = new_uuid(), new_uuid()
    api.allocate(migration, {host: {"VCPU": 2}})
    before = _generation(api, host)

    r = api.post(
        "/allocations",
        {
            migration: {
                "allocations": {},
                "consumer_generation": _consumer_generation(api, migration),
                "project_id": "proj",
                "user_id": "user",
            },
            instance: {
                "allocations": {host: {"resources": {"VCPU": 2}}},
                "consumer_generation": None,
                "project_id": "proj",
                "user_id": "user",
            },
        },
        version="1.28",
    )

    assert r.status_code == 204, r.data
    assert _generation(api, host) == before + 1


def test_moving_a_consumer_leaves_the_source_generation_alone(api):
    # Placement moves the generation of the providers the new allocations are on, not of those left.
    source = api.create_provider("source", inventory={"VCPU": 8})
    target = api.create_provider("target", inventory={"VCPU": 8})
    consumer = new_uuid()
    api.allocate(consumer, {source: {"VCPU": 2}})
    before = {rp: _generation(api, rp) for rp in (source, target)}

    api.allocate(consumer, {target: {"VCPU": 2}}, generation=_consumer_generation(api, consumer))

    assert _generation(api, source) == before[source]
    assert _generation(api, target) == before[target] + 1


def test_delete_allocations_leaves_generations_alone(api):
    host = api.create_provider("host", inventory={"VCPU": 8})
    consumer = new_uuid()
    api.allocate(consumer, {host: {"VCPU": 2}})
    before = _generation(api, host)

    assert api.delete(f"/allocations/{consumer}").status_code == 204

    assert _generation(api, host) == before


# --- inventory in use: the wording of each refusal ---------------------------------------------------


def _host_in_use(api):
    host = api.create_provider("host", inventory={"VCPU": 8, "MEMORY_MB": 1024})
    api.allocate(new_uuid(), {host: {"VCPU": 1}})
    return host


def test_replacing_inventories_in_use_is_an_update_conflict(api):
    host = _host_in_use(api)
    r = api.put(
        f"/resource_providers/{host}/inventories",
        {"resource_provider_generation": _generation(api, host), "inventories": {"MEMORY_MB": {"total": 1024}}},
    )
    assert r.status_code == 409 and error_code(r) == "placement.inventory.inuse"
    assert _message(r) == (f"update conflict: Inventory for 'VCPU' on resource provider '{host}' in use.")


def test_deleting_an_inventory_in_use_names_the_class(api):
    host = _host_in_use(api)
    r = api.delete(f"/resource_providers/{host}/inventories/VCPU")
    assert r.status_code == 409 and error_code(r) == "placement.inventory.inuse"
    assert _message(r) == (
        f"Unable to delete inventory of class VCPU: Inventory for 'VCPU' on resource provider '{host}' in use."
    )


def test_deleting_all_inventories_in_use(api):
    host = _host_in_use(api)
    r = api.delete(f"/resource_providers/{host}/inventories")
    assert r.status_code == 409 and error_code(r) == "placement.inventory.inuse"
    assert _message(r) == (f"Inventory for 'VCPU' on resource provider '{host}' in use.")


# --- deliberate differences (docs/compatibility.md) --------------------------------------------------

_UNALLOCATABLE = {"total": 8, "min_unit": 4, "max_unit": 2}


def test_an_inventory_that_could_never_be_allocated_is_refused(api):
    host = api.create_provider("host")
    r = api.put(
        f"/resource_providers/{host}/inventories",
        {"resource_provider_generation": _generation(api, host), "inventories": {"VCPU": _UNALLOCATABLE}},
    )
    assert r.status_code == 400
    assert "The minimum unit is greater than the maximum unit." in error_detail(r)
    assert api.get(f"/resource_providers/{host}/inventories").json_body["inventories"] == {}


def test_a_stale_generation_is_refused_before_the_unallocatable_inventory(api):
    host = api.create_provider("host", inventory={"VCPU": 8})
    stale = _generation(api, host) - 1
    writes = [
        ("PUT", f"/resource_providers/{host}/inventories", {"inventories": {"VCPU": _UNALLOCATABLE}}),
        ("PUT", f"/resource_providers/{host}/inventories/VCPU", dict(_UNALLOCATABLE)),
        ("POST", f"/resource_providers/{host}/inventories", {"resource_class": "MEMORY_MB", **_UNALLOCATABLE}),
    ]
    for method, path, body in writes:
        r = api.request(method, path, {"resource_provider_generation": stale, **body})
        assert r.status_code == 409, (method, path, r.data)
        assert error_code(r) == "placement.concurrent_update"


# --- allocation candidates: from 1.36 only a suffixed group named in same_subtree may lack resources -----

_RESOURCELESS_UNSUFFIXED = (
    "Resourceless suffixed group request should be specified in `same_subtree` query param: bad group(s) - ['']."
)


@pytest.mark.parametrize(
    "unsuffixed",
    ["required=HW_NUMA_ROOT", "required=CUSTOM_NOT_A_TRAIT", f"member_of={_AGGREGATE}", f"in_tree={_TREE}"],
)
@pytest.mark.parametrize("version", ["1.36", "1.39"])
def test_an_unsuffixed_group_without_resources_is_refused(api, unsuffixed, version):
    api.create_provider("host", uuid_=_TREE, inventory={"VCPU": 8}, traits=["HW_NUMA_ROOT"], aggregates=[_AGGREGATE])
    r = api.get(f"/allocation_candidates?resources1=VCPU:1&{unsuffixed}", version=version)
    assert r.status_code == 400, r.data
    assert error_code(r) == "placement.query.bad_value"
    assert _message(r) == _RESOURCELESS_UNSUFFIXED


def test_a_query_without_any_group_misses_a_value_from_1_36(api):
    r = api.get("/allocation_candidates", version="1.36")
    assert r.status_code == 400 and error_code(r) == "placement.query.missing_value"
    assert _message(r) == "There must be at least one resources or resources[$S] parameter."


# --- an amount larger than any inventory can hold finds nothing, as in Placement ------------------

_HUGE_AMOUNTS = ["99999999999", "4294967296", str(2**63), "99999999999999999999999"]


@pytest.mark.parametrize("amount", _HUGE_AMOUNTS)
def test_a_huge_amount_finds_no_candidates(api, amount):
    host = api.create_provider("host", inventory={"VCPU": {"total": 2147483647, "allocation_ratio": 16.0}})
    child = api.create_provider("numa", parent=host, inventory={"VCPU": 8})
    for query in (
        f"resources=VCPU:{amount}",
        f"resources=VCPU:1&resources1=VCPU:{amount}",
        f"resources1=VCPU:{amount}&resources2=VCPU:1&group_policy=none",
    ):
        r = api.get(f"/allocation_candidates?{query}")
        assert r.status_code == 200, (query, r.data)
        assert r.json_body == {"allocation_requests": [], "provider_summaries": {}}
    # The same amount found nothing because of its size, not because the search found nothing.
    assert len(api.get("/allocation_candidates?resources1=VCPU:8").json_body["allocation_requests"]) == 2
    r = api.get(f"/berth/allocation_candidates/explain?resources=VCPU:{amount}")
    assert r.status_code == 200 and r.json_body["candidates"] == 0
    assert child


@pytest.mark.parametrize("amount", _HUGE_AMOUNTS)
def test_a_huge_amount_lists_no_providers(api, amount):
    api.create_provider("host", inventory={"VCPU": {"total": 2147483647, "allocation_ratio": 16.0}})
    r = api.get(f"/resource_providers?resources=VCPU:{amount}")
    assert r.status_code == 200, r.data
    assert r.json_body["resource_providers"] == []


# --- a query parameter given more than once: the value Placement reads counts, on every route ------
# Placement reads ``limit`` and ``group_policy`` of GET /allocation_candidates by their first value
# (``req.GET.getall(key)[0]``), every other parameter taken singly by its last (``req.GET[key]``).

FIRST, LAST = "first", "last"

# (path, microversion, the rest of the query, key, first value, second value, the value that counts)
_REPEATED = [
    ("/allocation_candidates", "latest", "resources=VCPU:1", "limit", "3", "1", FIRST),
    ("/allocation_candidates", "latest", "resources=VCPU:1", "limit", "1", "2", FIRST),
    (
        "/allocation_candidates",
        "latest",
        "resources1=VCPU:1&resources2=VCPU:1",
        "group_policy",
        "isolate",
        "none",
        FIRST,
    ),
    (
        "/allocation_candidates",
        "latest",
        "resources1=VCPU:1&resources2=VCPU:1",
        "group_policy",
        "none",
        "isolate",
        FIRST,
    ),
    ("/allocation_candidates", "latest", "", "resources", "VCPU:1", "VCPU:64", LAST),
    ("/allocation_candidates", "latest", "", "resources1", "VCPU:64", "VCPU:1", LAST),
    ("/allocation_candidates", "latest", "resources=VCPU:1", "in_tree", "{big}", "{small}", LAST),
    ("/allocation_candidates", "latest", "resources1=VCPU:1", "in_tree1", "{small}", "{big}", LAST),
    ("/allocation_candidates", "1.38", "resources=VCPU:1", "required", "CUSTOM_A", "CUSTOM_B", LAST),
    ("/allocation_candidates", "1.38", "resources1=VCPU:1", "required1", "CUSTOM_B", "CUSTOM_A", LAST),
    ("/resource_providers", "latest", "", "uuid", "{big}", "{small}", LAST),
    ("/resource_providers", "latest", "", "name", "small", "big", LAST),
    ("/resource_providers", "latest", "", "in_tree", "{big}", "{small}", LAST),
    ("/resource_providers", "latest", "", "resources", "VCPU:1", "VCPU:64", LAST),
    ("/resource_providers", "1.38", "", "required", "CUSTOM_A", "CUSTOM_B", LAST),
    ("/usages", "1.38", "", "project_id", "p2", "p1", LAST),
    ("/usages", "1.38", "project_id=p1", "user_id", "u1", "u2", LAST),
    ("/usages", "1.38", "project_id=p1", "consumer_type", "MIGRATION", "INSTANCE", LAST),
    ("/traits", "latest", "", "name", "in:CUSTOM_A", "in:CUSTOM_B", LAST),
    ("/traits", "latest", "name=startswith:CUSTOM_", "associated", "true", "false", LAST),
]


@pytest.mark.parametrize(
    ("path", "version", "rest", "key", "first", "second", "counts"),
    _REPEATED,
    ids=[f"{path}:{key}={first},{second}" for path, _, _, key, first, second, _ in _REPEATED],
)
def test_a_repeated_parameter_counts_for_the_value_placement_reads(
    api, path, version, rest, key, first, second, counts
):
    small = api.create_provider("small", inventory={"VCPU": 8}, traits=["CUSTOM_A"])
    big = api.create_provider("big", inventory={"VCPU": 64}, traits=["CUSTOM_B"])
    api.create_provider("mid", inventory={"VCPU": 16})
    api.put("/traits/CUSTOM_UNUSED")
    api.allocate(new_uuid(), {small: {"VCPU": 1}}, project="p1", user="u1")
    api.allocate(new_uuid(), {big: {"VCPU": 2}}, project="p1", user="u2", consumer_type="MIGRATION")
    api.allocate(new_uuid(), {big: {"VCPU": 4}}, project="p2", user="u1")
    first, second = (value.format(small=small, big=big) for value in (first, second))

    def answer(*values):
        query = "&".join([*([rest] if rest else []), *(f"{key}={value}" for value in values)])
        r = api.get(f"{path}?{query}", version=version)
        assert r.status_code == 200, r.data
        return r.json_body

    alone = {FIRST: answer(first), LAST: answer(second)}
    assert alone[FIRST] != alone[LAST]
    assert answer(first, second) == alone[counts]


@pytest.mark.parametrize(
    "query",
    [
        "limit=5&limit=x",
        "limit=x&limit=5",
        "group_policy=none&group_policy=any",
        "group_policy=any&group_policy=none",
    ],
)
def test_every_value_of_limit_and_group_policy_is_checked(api, query):
    """Placement checks only the last value against its schema, and uses the first: ``limit=x&limit=5``
    is a 500 there, ``group_policy=any&group_policy=none`` acts as ``none``.  Berth checks the value
    it uses too (docs/compatibility.md)."""
    api.create_provider("host", inventory={"VCPU": 8})
    r = api.get(f"/allocation_candidates?resources1=VCPU:1&resources2=VCPU:1&{query}")
    assert r.status_code == 400, r.data
    assert _message(r).startswith("Invalid query string parameters")


# --- group_policy counts every suffixed group; a query breaking several rules is refused for the first
# --- rule Placement checks

_GROUP_POLICY_REQUIRED = (
    'The "group_policy" parameter is required when specifying more than one "resources{N}" parameter.'
)


def test_group_policy_is_required_by_two_suffixed_groups_with_or_without_resources(api):
    host = api.create_provider("host", inventory={"VCPU": 8}, traits=["HW_CPU_X86_SSE42"])
    query = "resources2=VCPU:1&required_NUMAz=HW_CPU_X86_SSE42&same_subtree=2,_NUMAz"
    r = api.get(f"/allocation_candidates?{query}")
    assert r.status_code == 400, r.data
    assert _message(r) == _GROUP_POLICY_REQUIRED
    r = api.get(f"/allocation_candidates?{query}&group_policy=none")
    assert r.status_code == 200, r.data
    assert list(r.json_body["provider_summaries"]) == [host]


@pytest.mark.parametrize(
    "query,code,message",
    [
        # Placement reads the request-wide parameters before the request groups.
        (
            "resources1=VCPU:1&resources2=VCPU:1&root_required=CUSTOM_A&root_required=CUSTOM_B",
            "placement.query.duplicate_key",
            "Query parameter 'root_required' may be specified only once.",
        ),
        (
            "resources1=VCPU:1&resources2=VCPU:1&same_subtree=1,",
            "placement.query.bad_value",
            "Empty string (unsuffixed group) can not be specified in `same_subtree`",
        ),
        # ... checks the groups' resources before contradictions within a group ...
        (
            "resources=VCPU:1&required=CUSTOM_A,!CUSTOM_A&required1=CUSTOM_B",
            "placement.query.bad_value",
            "Resourceless suffixed group request should be specified in `same_subtree` query param: "
            "bad group(s) - ['1'].",
        ),
        # ... resourceless groups before the suffixes same_subtree names ...
        (
            "resources=VCPU:1&required1=CUSTOM_B&same_subtree=_X,_Y",
            "placement.query.bad_value",
            "Resourceless suffixed group request should be specified in `same_subtree` query param: "
            "bad group(s) - ['1'].",
        ),
        # ... and contradictions before a missing group_policy.
        (
            "resources1=VCPU:1&resources2=VCPU:1&required1=CUSTOM_A,!CUSTOM_A",
            "placement.undefined_code",
            "Conflicting required and forbidden traits found in the following traits keys: required1: (CUSTOM_A)",
        ),
    ],
)
def test_a_query_breaking_two_rules_is_refused_for_the_one_placement_checks_first(api, query, code, message):
    r = api.get(f"/allocation_candidates?{query}")
    assert r.status_code == 400, r.data
    assert error_code(r) == code
    assert _message(r) == message


def test_every_contradicting_trait_is_named_with_its_key(api):
    r = api.get("/allocation_candidates?resources=VCPU:1&required=CUSTOM_B,CUSTOM_A,!CUSTOM_A,!CUSTOM_B")
    assert _message(r) == (
        "Conflicting required and forbidden traits found in the following traits keys: "
        "required: (CUSTOM_A), required: (CUSTOM_B)"
    )


def test_unknown_suffixes_of_same_subtree_are_named_with_every_group(api):
    r = api.get("/allocation_candidates?resources=VCPU:1&resources_B=VCPU:1&group_policy=none&same_subtree=_B,_X")
    assert error_code(r) == "placement.query.bad_value"
    assert _message(r) == "Real suffixes should be specified in `same_subtree`: ['_X'] not found in ['', '_B']."


def test_orphaned_keys_are_named_in_the_order_given(api):
    r = api.get("/allocation_candidates?resources=VCPU:1&required2=CUSTOM_A&required1=CUSTOM_B", version="1.35")
    assert _message(r) == (
        "All traits parameters must be associated with resources.  "
        "Found the following orphaned traits keys: required2, required1"
    )
    # A group that only forbids traits has no orphaned required trait: it lacks resources.
    r = api.get("/allocation_candidates?resources=VCPU:1&required1=!CUSTOM_B", version="1.35")
    assert _message(r) == "All request groups must specify resources."


# --- a body that fails its schema is named in one line, for the item jsonschema ranks best -----------


def _one_line(response):
    detail = error_detail(response)
    title, message = detail.split("\n\n", 1)
    assert "\n" not in message, detail
    return message.strip()


def test_a_schema_refusal_is_one_line(api):
    r = api.post("/resource_classes", {"name": "fake_class"})
    assert r.status_code == 400
    message = _one_line(r)
    assert message.startswith("JSON does not validate: 'fake_class' does not match '^CUSTOM_[A-Z0-9_]+$'  ")
    assert "Failed validating 'pattern' in schema['properties']['name']:" in message


@pytest.mark.parametrize(
    "version,body",
    [("1.1", ["not-a-uuid"]), ("1.19", {"aggregates": ["not-a-uuid"], "resource_provider_generation": 0})],
)
def test_an_aggregate_that_is_not_a_uuid_is_named_in_one_line(api, version, body):
    host = api.create_provider("host")
    r = api.put(f"/resource_providers/{host}/aggregates", body, version=version)
    assert r.status_code == 400
    assert _one_line(r).startswith("JSON does not validate: 'not-a-uuid' is not a 'uuid'  ")


def test_a_schema_refusal_names_the_best_match(api):
    # Two errors: the name's type (one level down) and an unknown key (at the top); jsonschema ranks
    # the shallower one first.
    r = api.post("/resource_classes", {"name": 5, "colour": "red"})
    assert _one_line(r).startswith(
        "JSON does not validate: Additional properties are not allowed ('colour' was unexpected)"
    )


# --- links and Location headers keep the path the service is mounted under -----------------------

_MOUNT = "/placement"


class _MountedClient(Client):
    """A client of the application mounted under /placement (SCRIPT_NAME), as most clouds mount it."""

    def open(self, *args, **kwargs):
        kwargs.setdefault("base_url", f"http://localhost{_MOUNT}")
        return super().open(*args, **kwargs)


def _hrefs(body):
    return [link["href"] for link in body["links"]]


def test_links_and_locations_keep_the_mount_point(app, api):
    api.client = _MountedClient(app)
    uuid = new_uuid()
    r = api.post("/resource_providers", {"name": "host", "uuid": uuid}, version="1.20")
    assert r.status_code == 200, r.data
    assert r.request.environ["SCRIPT_NAME"] == _MOUNT
    assert r.headers["Location"] == f"http://localhost{_MOUNT}/resource_providers/{uuid}"
    base = f"{_MOUNT}/resource_providers/{uuid}"
    expected = [base] + [f"{base}/{rel}" for rel in ("inventories", "usages", "aggregates", "traits", "allocations")]
    assert _hrefs(r.json_body) == expected
    assert _hrefs(api.get(f"/resource_providers/{uuid}").json_body) == expected
    assert _hrefs(api.get("/resource_providers").json_body["resource_providers"][0]) == expected
    r = api.put(f"/resource_providers/{uuid}", {"name": "renamed"})
    assert _hrefs(r.json_body) == expected

    r = api.post(f"/resource_providers/{uuid}/inventories", {"resource_class": "VCPU", "total": 8})
    assert r.headers["Location"] == f"http://localhost{base}/inventories/VCPU"

    r = api.post("/resource_classes", {"name": "CUSTOM_GOLD"})
    assert r.headers["Location"] == f"http://localhost{_MOUNT}/resource_classes/CUSTOM_GOLD"
    r = api.put("/resource_classes/CUSTOM_SILVER")
    assert r.headers["Location"] == f"http://localhost{_MOUNT}/resource_classes/CUSTOM_SILVER"
    assert _hrefs(api.get("/resource_classes/CUSTOM_GOLD").json_body) == [f"{_MOUNT}/resource_classes/CUSTOM_GOLD"]
    listed = {c["name"]: _hrefs(c) for c in api.get("/resource_classes").json_body["resource_classes"]}
    assert listed["VCPU"] == [f"{_MOUNT}/resource_classes/VCPU"]
    r = api.put("/resource_classes/CUSTOM_GOLD", {"name": "CUSTOM_BRONZE"}, version="1.2")
    assert _hrefs(r.json_body) == [f"{_MOUNT}/resource_classes/CUSTOM_BRONZE"]

    r = api.put("/traits/CUSTOM_FAST")
    assert r.headers["Location"] == f"http://localhost{_MOUNT}/traits/CUSTOM_FAST"
    # Placement's version document points to "this same URL" with an empty, relative, link.
    assert _hrefs(api.get("/").json_body["versions"][0]) == [""]


# --- a reshape that empties a provider moves its generation once -----------------------------------


def test_a_reshape_that_empties_the_root_moves_its_generation_once(api):
    root = api.create_provider("cn", inventory={"VGPU": 4})
    consumer = new_uuid()
    api.allocate(consumer, {root: {"VGPU": 1}})
    child = api.create_provider("gpu0", parent=root)
    before = {rp: _generation(api, rp) for rp in (root, child)}
    r = api.post(
        "/reshaper",
        {
            "inventories": {
                root: {"resource_provider_generation": before[root], "inventories": {}},
                child: {"resource_provider_generation": before[child], "inventories": {"VGPU": {"total": 4}}},
            },
            "allocations": {
                consumer: {
                    "allocations": {child: {"resources": {"VGPU": 1}}},
                    "project_id": "proj",
                    "user_id": "user",
                    "consumer_generation": _consumer_generation(api, consumer),
                    "consumer_type": "INSTANCE",
                },
            },
        },
        headers=SERVICE_HEADERS,
    )
    assert r.status_code == 204, r.data
    # Placement: the root only loses its inventory at the end; the child gets the interim and the
    # final inventory and the allocations, each a move of its own.
    assert _generation(api, root) == before[root] + 1
    assert _generation(api, child) == before[child] + 3
    assert api.get(f"/resource_providers/{root}/inventories").json_body["inventories"] == {}


# --- 404 and 409 texts of traits, providers, inventories and resource classes read as Placement's -----


def test_not_found_texts(api):
    host = api.create_provider("host", inventory={"VCPU": 8})
    nobody = new_uuid()
    no_provider = f"No resource provider with uuid {nobody} found"
    cases = [
        ("GET", "/traits/CUSTOM_NOPE", None, "No such trait(s): CUSTOM_NOPE."),
        ("DELETE", "/traits/CUSTOM_NOPE", None, "No such trait(s): CUSTOM_NOPE."),
        ("GET", f"/resource_providers/{nobody}", None, no_provider),
        ("DELETE", f"/resource_providers/{nobody}", None, f"{no_provider} for delete"),
        ("GET", f"/resource_providers/{nobody}/traits", None, f"{no_provider}: {no_provider}"),
        ("GET", f"/resource_providers/{nobody}/inventories", None, f"{no_provider} : {no_provider}"),
        ("GET", f"/resource_providers/{nobody}/inventories/VCPU", None, f"{no_provider} : {no_provider}"),
        ("GET", f"/resource_providers/{host}/inventories/DISK_GB", None, f"No inventory of class DISK_GB for {host}"),
        (
            "DELETE",
            f"/resource_providers/{host}/inventories/DISK_GB",
            None,
            "No inventory of class DISK_GB found for delete: No inventory of class DISK_GB found for delete",
        ),
        (
            "DELETE",
            f"/resource_providers/{host}/inventories/CUSTOM_NOPE",
            None,
            "No inventory of class CUSTOM_NOPE found for delete: No such resource class CUSTOM_NOPE.",
        ),
        (
            "PUT",
            f"/resource_providers/{host}/inventories/CUSTOM_NOPE",
            {"resource_provider_generation": _generation(api, host), "total": 4},
            "No such resource class CUSTOM_NOPE.",
        ),
        ("GET", "/resource_classes/CUSTOM_NOPE", None, "No such resource class CUSTOM_NOPE."),
        ("DELETE", "/resource_classes/CUSTOM_NOPE", None, "No such resource class CUSTOM_NOPE."),
    ]
    for method, path, body, message in cases:
        r = api.request(method, path, body)
        assert r.status_code == 404, (method, path, r.data)
        assert _message(r) == message, (method, path)


def test_an_unknown_provider_is_not_found_before_its_body_is_judged(api):
    nobody = new_uuid()
    writes = [
        ("PUT", f"/resource_providers/{nobody}", {"nme": "x"}),
        ("PUT", f"/resource_providers/{nobody}/inventories", {"inventories": {}}),
        ("PUT", f"/resource_providers/{nobody}/inventories/VCPU", {"total": "eight"}),
        ("POST", f"/resource_providers/{nobody}/inventories", {"total": 8}),
    ]
    for method, path, body in writes:
        r = api.request(method, path, body)
        assert r.status_code == 404, (method, path, r.data)
        assert _message(r) == f"No resource provider with uuid {nobody} found"
        r = api.request(method, path, raw=b"{not json")
        assert r.status_code == 404, (method, path, r.data)


def test_conflict_texts(api):
    host = api.create_provider("host", inventory={"VCPU": 8})
    api.create_provider("other")
    stale = _generation(api, host) - 1
    writes = [
        (
            "PUT",
            f"/resource_providers/{host}/inventories",
            {"resource_provider_generation": stale, "inventories": {"VCPU": {"total": 4}}},
            "resource provider generation conflict",
        ),
        (
            "PUT",
            f"/resource_providers/{host}/inventories/VCPU",
            {"resource_provider_generation": stale, "total": 4},
            "resource provider generation conflict",
        ),
        (
            "POST",
            f"/resource_providers/{host}/inventories",
            {"resource_provider_generation": stale, "resource_class": "DISK_GB", "total": 4},
            "Update conflict: Another thread concurrently updated the resource provider data. Please retry your update",
        ),
    ]
    for method, path, body, message in writes:
        r = api.request(method, path, body)
        assert r.status_code == 409, (method, path, r.data)
        assert error_code(r) == "placement.concurrent_update"
        assert _message(r) == message, (method, path)
    r = api.put(f"/resource_providers/{host}", {"name": "other"})
    assert r.status_code == 409 and error_code(r) == "placement.duplicate_name"
    assert _message(r) == "Conflicting resource provider other already exists."


def test_refusal_texts_of_names(api):
    r = api.delete("/resource_classes/VCPU")
    assert r.status_code == 400
    assert _message(r) == "Error in delete resource class: Cannot delete standard resource class VCPU."
    host = api.create_provider("host")
    r = api.put(
        f"/resource_providers/{host}/traits",
        {"traits": ["CUSTOM_NOPE"], "resource_provider_generation": _generation(api, host)},
    )
    assert r.status_code == 400 and _message(r) == "No such trait CUSTOM_NOPE"
    r = api.get("/resource_providers?required=CUSTOM_NOPE")
    assert r.status_code == 400
    assert _message(r) == 'Invalid trait(s) in "required" parameter: No such trait(s): CUSTOM_NOPE.'
    r = api.get("/allocation_candidates?resources=VCPU:1&required=CUSTOM_NOPE")
    assert r.status_code == 400 and _message(r) == "No such trait(s): CUSTOM_NOPE."


# --- inventory refusals written by the store ------------------------------------------------------------


def test_adding_an_inventory_that_exists_is_an_update_conflict(api):
    host = api.create_provider("host", inventory={"VCPU": 8})
    r = api.post(
        f"/resource_providers/{host}/inventories",
        {"resource_class": "VCPU", "total": 4, "resource_provider_generation": _generation(api, host)},
    )
    assert r.status_code == 409 and error_code(r) == "placement.concurrent_update"
    assert _message(r) == f"Update conflict: Inventory for 'VCPU' on resource provider '{host}' already exists."


def test_replacing_inventories_with_an_unknown_class_names_it(api):
    host = api.create_provider("host")
    r = api.put(
        f"/resource_providers/{host}/inventories",
        {"resource_provider_generation": _generation(api, host), "inventories": {"CUSTOM_NOPE": {"total": 1}}},
    )
    assert r.status_code == 400
    assert _message(r) == (
        f"Unknown resource class in inventory for resource provider {host}: No such resource class CUSTOM_NOPE."
    )


def test_updating_an_inventory_the_provider_lacks_names_the_class(api):
    host = api.create_provider("host", inventory={"VCPU": 8})
    r = api.put(
        f"/resource_providers/{host}/inventories/MEMORY_MB",
        {"resource_provider_generation": _generation(api, host), "total": 1024},
    )
    assert r.status_code == 400
    assert _message(r) == (
        f"No inventory record with resource class for resource provider {host}: No inventory of class MEMORY_MB found."
    )


# --- 404 texts of the provider's allocations and usages ------------------------------------------------


def test_allocations_of_an_unknown_provider(api):
    missing = new_uuid()
    r = api.get(f"/resource_providers/{missing}/allocations", version="")
    assert r.status_code == 404
    assert _message(r) == f"Resource provider '{missing}' not found: No resource provider with uuid {missing} found"


def test_usages_of_an_unknown_provider(api):
    missing = new_uuid()
    r = api.get(f"/resource_providers/{missing}/usages", version="")
    assert r.status_code == 404
    lookup = f"No resource provider with uuid {missing} found"
    assert _message(r) == f"{lookup}: {lookup}"


# --- differences kept on purpose (docs/compatibility.md) ---------------------------------------------


@pytest.mark.parametrize(
    ("query", "message"),
    [
        # Placement answers an empty 200 to the first two: the group it reaches first (in the
        # order of the query's keys) finds no provider, and it never looks the later names up.
        (
            "resources1=VCPU:100000&resources2=CUSTOM_NOPE:1&group_policy=none",
            "Invalid resource class in resources parameter: No such resource class CUSTOM_NOPE.",
        ),
        (
            f"resources=VCPU:1&member_of={_AGGREGATE}&required=CUSTOM_NOPE",
            "No such trait(s): CUSTOM_NOPE.",
        ),
        (
            "resources2=CUSTOM_NOPE:1&resources1=VCPU:100000&group_policy=none",
            "Invalid resource class in resources parameter: No such resource class CUSTOM_NOPE.",
        ),
        # Both refuse the first unknown name of the first group, whatever its kind.
        (
            "resources=VCPU:1&required=CUSTOM_NOPE&resources1=CUSTOM_NOPE:1",
            "No such trait(s): CUSTOM_NOPE.",
        ),
        # Placement names the first unknown name alone, in the order given.
        ("resources=VCPU:1&required=CUSTOM_NOPE2,CUSTOM_NOPE1", "No such trait(s): CUSTOM_NOPE2."),
        ("resources=VCPU:1&required=!CUSTOM_NOPE2,!CUSTOM_NOPE1", "No such trait(s): CUSTOM_NOPE2."),
        ("resources=VCPU:1&root_required=CUSTOM_NOPE2,CUSTOM_NOPE1", "No such trait(s): CUSTOM_NOPE2."),
        (
            "resources=CUSTOM_NOPE_B:1,CUSTOM_NOPE_A:1",
            "Invalid resource class in resources parameter: No such resource class CUSTOM_NOPE_B.",
        ),
    ],
    ids=[
        "unreached class",
        "unreached trait",
        "reached class",
        "first group first",
        "required",
        "forbidden",
        "root_required",
        "classes",
    ],
)
def test_an_unknown_name_is_refused_whatever_the_order_of_the_groups(api, query, message):
    api.create_provider("host", inventory={"VCPU": 8})
    r = api.get(f"/allocation_candidates?{query}")
    assert r.status_code == 400, r.data
    assert _message(r) == message


def test_below_1_29_with_a_limit_only_the_providers_of_the_answers_are_summarised(api):
    """Placement, limiting the answers, keeps the summary of every provider of an answer's tree that
    served some other answer, below 1.29 too, where summaries name the answers' providers only."""
    root = api.create_provider("cn", inventory={"VCPU": 8})
    child = api.create_provider("numa", parent=root, inventory={"VCPU": 8})
    r = api.get("/allocation_candidates?resources=VCPU:1&limit=1", version="1.28")
    assert r.status_code == 200, r.data
    (answer,) = r.json_body["allocation_requests"]
    assert set(r.json_body["provider_summaries"]) == set(answer["allocations"]) < {root, child}
    r = api.get("/allocation_candidates?resources=VCPU:1", version="1.28")
    assert set(r.json_body["provider_summaries"]) == {root, child}


@pytest.mark.parametrize("policy", ["", "&group_policy=isolate", "&group_policy=none"])
def test_the_unsuffixed_group_and_a_granular_group_of_one_class_get_every_valid_request(api, policy):
    """Placement, without group_policy=none, adds the second group's amount onto the first group's
    in place while it merges them, so later requests carry amounts larger than asked: here it
    answers only ``{root: 1, child: 2}`` (over the child's capacity) and leaves out both valid ones."""
    root = api.create_provider("cn", inventory={"VCPU": 1})
    child = api.create_provider("numa", parent=root, inventory={"VCPU": 1})
    r = api.get(f"/allocation_candidates?resources=VCPU:1&resources1=VCPU:1{policy}")
    assert r.status_code == 200, r.data
    answers = sorted(
        (
            sorted((rp, entry["resources"]["VCPU"]) for rp, entry in request["allocations"].items()),
            request["mappings"][""],
            request["mappings"]["1"],
        )
        for request in r.json_body["allocation_requests"]
    )
    both = sorted([(root, 1), (child, 1)])
    assert answers == sorted([(both, [root], [child]), (both, [child], [root])])
