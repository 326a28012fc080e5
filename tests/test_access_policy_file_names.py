"""A policy file naming a rule the service does not have (a misspelt name overrides nothing, and
oslo.policy says nothing of it) is said at start, for the service's rules and the conductors'."""

import logging

import pytest

from berth.api.app import PlacementApp, Settings
from berth.conductor.api.policy import RULES
from berth.web.access.policy import PolicyEnforcer


def _written(tmp_path, text):
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    return str(path)


def test_an_unknown_rule_of_the_services_policy_file_is_said(db, tmp_path, caplog):
    policy = _written(
        tmp_path,
        '"placement:resource_providers:lst": "role:reader"\n"placement:traits:list": "rule:ops"\n"ops": "role:ops"\n',
    )
    with caplog.at_level(logging.WARNING, logger="berth.web.access.policy"):
        PlacementApp(db, Settings(policy_file=policy))
    [said] = [r.getMessage() for r in caplog.records if "policy file" in r.getMessage()]
    # The misspelt name, not the known rule nor the helper rule another rule refers to.
    assert said.endswith(": placement:resource_providers:lst"), said


@pytest.mark.parametrize("name, said", [("berth:servers:shows", True), ("berth:servers:show", False)])
def test_an_unknown_rule_of_the_conductors_policy_file_is_said(tmp_path, caplog, name, said):
    with caplog.at_level(logging.WARNING, logger="berth.web.access.policy"):
        PolicyEnforcer(RULES, _written(tmp_path, f'"{name}": "role:admin"\n'))
    assert any(name in r.getMessage() for r in caplog.records) is said
