"""The filter scheduler's settings: names checked, multipliers of the policy with overrides."""

from __future__ import annotations

import pytest

from berth.domain.weighing import Multipliers
from berth.scheduler.errors import ConfigError
from berth.scheduler.settings import FILTER_NAMES, WEIGHER_NAMES, SelectionSettings


def test_defaults_are_novas():
    settings = SelectionSettings()
    assert settings.enabled_filters == FILTER_NAMES and settings.weighers == WEIGHER_NAMES
    assert settings.base_multipliers == Multipliers(ram=1.0, cpu=1.0, disk=1.0, instances=0.0)
    assert (settings.host_subset_size, settings.default_availability_zone) == (1, "nova")
    assert settings.restrict_isolated_hosts_to_isolated_images


def test_pack_turns_the_resource_weighers_round_and_overrides_win():
    settings = SelectionSettings(weigh_policy="pack", multipliers={"ram": 0.5})
    assert settings.base_multipliers == Multipliers(ram=0.5, cpu=-1.0, disk=-1.0)


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"enabled_filters": ("RamFilter",)}, "enabled_filters: unknown RamFilter"),
        ({"enabled_filters": ("ComputeFilter", "ComputeFilter")}, "given twice"),
        ({"weighers": ("IoOpsWeigher",)}, "weighers: unknown IoOpsWeigher"),
        ({"weigh_policy": "stack"}, "weigh_policy"),
        ({"multipliers": {"io_ops": 1.0}}, "multipliers: unknown io_ops"),
        ({"host_subset_size": 0}, "host_subset_size"),
    ],
)
def test_bad_settings(settings, problem):
    with pytest.raises(ConfigError, match=problem):
        SelectionSettings(**settings)
