"""The compiled fast path of request validation never accepts what jsonschema refuses.

``berth.api.validation.validate`` asks a fastjsonschema-compiled validator first and trusts its yes;
jsonschema (Draft 4, the reference's validator) only judges what the fast one refuses.  These tests
mutate valid bodies of every write schema at random and check that whenever the fast validator says
yes, jsonschema says yes too, and that the error text still comes from jsonschema.
"""

from __future__ import annotations

import copy

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from berth.api import microversion as mv
from berth.api.microversion import Version
from berth.api.schemas import every_schema
from berth.api.schemas.placement.aggregates import aggregates_put_schema
from berth.api.schemas.placement.allocation_candidates import allocation_candidates_query_schema
from berth.api.schemas.placement.allocations import allocations_post_schema, allocations_put_schema
from berth.api.schemas.placement.inventories import INVENTORIES_PUT, INVENTORY_POST, INVENTORY_PUT_ONE
from berth.api.schemas.placement.reshaper import reshaper_schema
from berth.api.schemas.placement.resource_classes import RESOURCE_CLASS_BODY
from berth.api.schemas.placement.resource_providers import provider_body_schema
from berth.api.schemas.placement.traits import PROVIDER_TRAITS_PUT
from berth.api.schemas.placement.usages import usages_query_schema
from berth.api.validation import compile_validators, validate
from berth.domain.errors import BadRequest
from berth.web.json_schemas import FORMAT_CHECKER, fast_validator

RP = "7b9a2c7e-4f4e-4a59-9d5e-0d6a3f0c1a11"
RP2 = "0f1e2d3c-4b5a-4968-8776-655443322110"
CONSUMER = "4d3c2b1a-0f9e-4d8c-8b7a-695847362514"
AGG = "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"


def _allocations_body(version):
    body = {
        "allocations": {RP: {"resources": {"VCPU": 2, "MEMORY_MB": 512}, "generation": 3}},
        "project_id": "p",
        "user_id": "u",
    }
    if version >= mv.CONSUMER_GENERATION:
        body["consumer_generation"] = None
    if version >= mv.CANDIDATE_MAPPINGS:
        body["mappings"] = {"": [RP]}
    if version >= mv.CONSUMER_TYPES:
        body["consumer_type"] = "INSTANCE"
    return body


V = Version
CASES = [
    (
        "provider create",
        provider_body_schema(V(1, 39), create=True),
        {"name": "cn-1", "uuid": RP, "parent_provider_uuid": None},
    ),
    ("provider update 1.13", provider_body_schema(V(1, 13), create=False), {"name": "cn-1"}),
    (
        "inventories",
        INVENTORIES_PUT,
        {
            "resource_provider_generation": 0,
            "inventories": {
                "VCPU": {
                    "total": 32,
                    "allocation_ratio": 4.0,
                    "reserved": 0,
                    "min_unit": 1,
                    "max_unit": 32,
                    "step_size": 1,
                },
                "CUSTOM_X": {"total": 1},
            },
        },
    ),
    ("inventory post", INVENTORY_POST, {"resource_class": "DISK_GB", "total": 10}),
    ("inventory put", INVENTORY_PUT_ONE, {"resource_provider_generation": 1, "total": 10}),
    (
        "traits",
        PROVIDER_TRAITS_PUT,
        {"resource_provider_generation": 2, "traits": ["HW_CPU_X86_AVX2", "CUSTOM_FAST"]},
    ),
    ("resource class", RESOURCE_CLASS_BODY, {"name": "CUSTOM_GOLD"}),
    (
        "aggregates 1.19",
        aggregates_put_schema(V(1, 19)),
        {"aggregates": [AGG], "resource_provider_generation": 0},
    ),
    ("aggregates 1.1", aggregates_put_schema(V(1, 1)), [AGG]),
    ("allocations put 1.39", allocations_put_schema(V(1, 39)), _allocations_body(V(1, 39))),
    ("allocations put 1.28", allocations_put_schema(V(1, 28)), _allocations_body(V(1, 28))),
    (
        "allocations put 1.8",
        allocations_put_schema(V(1, 8)),
        {
            "allocations": [{"resource_provider": {"uuid": RP}, "resources": {"VCPU": 1}}],
            "project_id": "p",
            "user_id": "u",
        },
    ),
    ("allocations post 1.39", allocations_post_schema(V(1, 39)), {CONSUMER: _allocations_body(V(1, 39))}),
    (
        "reshaper 1.39",
        reshaper_schema(V(1, 39)),
        {
            "inventories": {RP: {"resource_provider_generation": 1, "inventories": {"VCPU": {"total": 4}}}},
            "allocations": {CONSUMER: _allocations_body(V(1, 39))},
        },
    ),
    (
        "candidates query 1.39",
        allocation_candidates_query_schema(V(1, 39)),
        {"resources": "VCPU:1", "limit": "5", "required_GPU": "CUSTOM_X", "group_policy": "none"},
    ),
    ("usages query 1.39", usages_query_schema(V(1, 39)), {"project_id": "p", "consumer_type": "all"}),
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(
        [
            "",
            "VCPU",
            "CUSTOM_X",
            "lower",
            "VCPU\n",
            RP,
            RP.upper(),
            RP.replace("-", ""),
            "not-a-uuid",
            "x" * 256,
            "1.0",
            "0",
            "01",
            "none",
            "isolate",
            "all",
        ]
    )
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(["VCPU", "total", "name", "", RP, "x", "resources"]) | st.text(max_size=6),
            children,
            max_size=3,
        )
    ),
    max_leaves=8,
)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, prefix + (key,))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, prefix + (index,))


def _replace(value, path, new):
    if not path:
        return new
    value = copy.deepcopy(value)
    target = value
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = new
    return value


def _agree(schema, body):
    fast = fast_validator(schema)
    assert fast is not None, "every Berth schema compiles"
    try:
        fast(body)
        fast_ok = True
    except Exception:  # noqa: BLE001 - fastjsonschema's refusal
        fast_ok = False
    slow_ok = jsonschema.Draft4Validator(schema, format_checker=FORMAT_CHECKER).is_valid(body)
    assert not fast_ok or slow_ok, f"fast validator accepted what jsonschema refuses: {body!r}"
    return slow_ok


@pytest.mark.parametrize("name,schema,body", CASES, ids=[c[0] for c in CASES])
def test_valid_example_passes_both(name, schema, body):
    assert _agree(schema, body)
    validate(body, schema)


@pytest.mark.parametrize("name,schema,body", CASES, ids=[c[0] for c in CASES])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutations_never_pass_fast_only(name, schema, body, data):
    paths = list(_paths(body))
    path = data.draw(st.sampled_from(paths))
    mutated = _replace(body, path, data.draw(json_values))
    if data.draw(st.booleans()) and isinstance(mutated, dict):
        mutated = {**mutated, data.draw(st.sampled_from(["extra", "total", "VCPU", RP, ""])): data.draw(json_values)}
    _agree(schema, mutated)


@pytest.mark.parametrize(
    "value,accepted",
    [
        (1, True),
        (1.0, False),
        (True, False),
        (2**63, False),
        (-1, False),
        ("1", False),
    ],
)
def test_integer_rules_are_draft4(value, accepted):
    body = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": value}}}
    assert _agree(INVENTORIES_PUT, body) is accepted


def test_refusal_carries_jsonschema_text():
    with pytest.raises(BadRequest) as caught:
        validate({"resource_provider_generation": 0, "inventories": {"VCPU": {"total": "x"}}}, INVENTORIES_PUT)
    assert "JSON does not validate: 'x' is not of type 'integer'" in caught.value.detail
    assert "Failed validating 'type'" in caught.value.detail


def test_cached_schemas_are_not_shared_mutably():
    post = allocations_post_schema(V(1, 39))
    reshaper_schema(V(1, 39))
    assert post["minProperties"] == 1
    assert not _agree(post, {})


def test_every_schema_compiles_and_equal_schemas_share_one_validator():
    every = list(every_schema())
    compile_validators(every)
    assert all(fast_validator(schema) is not None for schema in every)
    at_20 = provider_body_schema(Version(1, 20), create=True)
    at_21 = provider_body_schema(Version(1, 21), create=True)
    assert at_20 is not at_21 and fast_validator(at_20) is fast_validator(at_21)
    assert fast_validator(at_20) is not fast_validator(provider_body_schema(Version(1, 13), create=True))
