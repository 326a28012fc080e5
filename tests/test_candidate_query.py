"""The query string of GET /allocation_candidates read into a typed ``CandidateQuery``."""

from __future__ import annotations

import dataclasses
from urllib.parse import parse_qsl

import pytest
from werkzeug.datastructures import MultiDict

from berth.api import microversion as mv
from berth.api.candidates.candidate_query import parse_query
from berth.domain.candidate_query import AggregateQuery, CandidateQuery, GroupQuery, TraitQuery
from berth.domain.errors import BadRequest

AGG1 = "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
AGG2 = "0f1e2d3c-4b5a-4968-8776-655443322110"
TREE = "7b9a2c7e-4f4e-4a59-9d5e-0d6a3f0c1a11"


def _args(query: str) -> MultiDict[str, str]:
    return MultiDict(parse_qsl(query, keep_blank_values=True))


def test_every_part_of_a_query_lands_in_its_field_in_the_order_given():
    query = parse_query(
        _args(
            "resources=VCPU:2,MEMORY_MB:512&required=HW_CPU_X86_AVX2,!CUSTOM_SLOW&required=in:CUSTOM_A,CUSTOM_B"
            f"&member_of=in:{AGG1},{AGG2}&member_of=!{AGG2}&resources_NIC=NET_BW_EGR_KILOBIT_PER_SEC:10"
            f"&in_tree_NIC={TREE.upper()}&required_PORT=CUSTOM_PHYSNET&group_policy=isolate&limit=3"
            "&root_required=COMPUTE_STATUS_ENABLED&same_subtree=_NIC,_PORT"
        ),
        mv.MAX,
    )
    assert query == CandidateQuery(
        groups=(
            GroupQuery(
                "",
                resources=(("VCPU", 2), ("MEMORY_MB", 512)),
                traits=TraitQuery(
                    required=(("HW_CPU_X86_AVX2",), ("CUSTOM_A", "CUSTOM_B")), forbidden=("CUSTOM_SLOW",)
                ),
                aggregates=AggregateQuery(member_of=((AGG1, AGG2),), forbidden=(AGG2,)),
            ),
            GroupQuery("_NIC", resources=(("NET_BW_EGR_KILOBIT_PER_SEC", 10),), in_tree=TREE),
            GroupQuery("_PORT", traits=TraitQuery(required=(("CUSTOM_PHYSNET",),))),
        ),
        group_policy="isolate",
        limit=3,
        root_required=TraitQuery(required=(("COMPUTE_STATUS_ENABLED",),)),
        same_subtree=(("_NIC", "_PORT"),),
        one_provider_per_tree=False,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        query.limit = 4  # type: ignore[misc]  # the point: a query cannot be changed once read


def test_before_1_29_an_answer_keeps_to_one_provider_per_tree():
    assert parse_query(_args("resources=VCPU:1"), mv.Version(1, 28)).one_provider_per_tree
    assert not parse_query(_args("resources=VCPU:1"), mv.NESTED_CANDIDATES).one_provider_per_tree


def test_before_1_39_only_the_last_required_counts():
    args = _args("resources=VCPU:1&required=CUSTOM_A&required=CUSTOM_B")
    assert parse_query(args, mv.Version(1, 38)).groups[0].traits == TraitQuery(required=(("CUSTOM_B",),))
    assert parse_query(args, mv.ANY_OF_TRAITS).groups[0].traits == TraitQuery(required=(("CUSTOM_A",), ("CUSTOM_B",)))


@pytest.mark.parametrize(
    "query,message",
    [
        ("resources1=VCPU:1&resources2=DISK_GB:1", 'The "group_policy" parameter is required'),
        ("resources=VCPU:1&required=CUSTOM_A,!CUSTOM_A", "Conflicting required and forbidden traits"),
        ("resources=VCPU:1&required_X=CUSTOM_A", "Resourceless suffixed group request should be specified"),
        ("resources=VCPU:1&same_subtree=_X", "Real suffixes should be specified in `same_subtree`"),
    ],
)
def test_refusals_name_the_rule_broken(query, message):
    with pytest.raises(BadRequest) as refused:
        parse_query(_args(query), mv.MAX)
    assert message in refused.value.detail
