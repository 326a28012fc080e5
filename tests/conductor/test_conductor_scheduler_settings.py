"""``berth conductor``'s scheduler settings: the PCI aliases flavors may name, read from the command line."""

from __future__ import annotations

import pytest

from berth.cli.services.conductor import control_plane, load_settings, pci_aliases
from berth.cli.settings import SettingsError

GPU = '[{"name": "gpu", "vendor_id": "10de", "product_id": "1eb8"}]'


def test_the_pci_aliases_reach_the_scheduler_and_the_selection_its_settings(tmp_path):
    settings = load_settings(
        {
            "pci_aliases": GPU,
            "max_placement_results": 40,
            "host_subset_size": 4,
            "database": f"sqlite:///{tmp_path / 'c.sqlite'}",
        },
        {},
    )
    plane = control_plane(settings)
    try:
        assert plane.scheduler_config.pci_aliases["gpu"].product_id == "1eb8"
        assert plane.scheduler_config.max_placement_results == 40
        assert plane.conductor.runner.selector.settings.host_subset_size == 4
    finally:
        plane.close()


@pytest.mark.parametrize("text", ['[{"name": "x"}]', "not json", '[{"name": "x", "colour": "red"}]'])
def test_an_alias_that_is_not_one_is_refused_naming_the_option(text):
    with pytest.raises(SettingsError, match="--pci-aliases"):
        pci_aliases(text)
