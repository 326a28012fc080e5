"""Per test module, a cloud of its own (cloudhelpers.py): the service, two conductors on a SQLite
file, three agents that registered with both."""

from __future__ import annotations

import pytest
from cloudhelpers import start_cloud, stop_cloud


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    made = start_cloud(f"sqlite:///{tmp_path_factory.mktemp('conductors') / 'conductor.sqlite'}", tmp_path_factory)
    yield made
    for log in stop_cloud(made):
        assert "Traceback" not in log, log
