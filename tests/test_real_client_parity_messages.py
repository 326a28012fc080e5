"""Texts the OpenStack client shows, found by running the same ``openstack`` commands against Berth
and against OpenStack Placement 16.0.0 and comparing what they print."""

from __future__ import annotations

from apihelpers import error_detail


def _message(response):
    """The detail's own message, after the status title that Placement (webob) puts first."""
    return error_detail(response).split("\n\n", 1)[-1].strip()


def test_a_limit_of_zero_quotes_placements_schema(api):
    # openstack allocation candidate list --resource VCPU=1 --limit 0
    r = api.get("/allocation_candidates?resources=VCPU:1&limit=0", version="1.39")
    assert r.status_code == 400
    assert _message(r) == (
        "Invalid query string parameters: '0' does not match '^[1-9][0-9]*$'  "
        "Failed validating 'pattern' in schema['properties']['limit']:     "
        "{'type': ['integer', 'string'],      'pattern': '^[1-9][0-9]*$',      'minimum': 1,      'minLength': 1}  "
        "On instance['limit']:     '0'"
    )


def test_an_inventory_total_of_zero_quotes_placements_schema(api):
    # openstack resource provider inventory class set <uuid> VCPU --total 0
    rp = api.create_provider("host")
    r = api.put(f"/resource_providers/{rp}/inventories/VCPU", {"resource_provider_generation": 0, "total": 0})
    assert r.status_code == 400
    assert "{'type': 'integer', 'maximum': 2147483647, 'minimum': 1}" in _message(r)
