"""The conductors' live tests that matter most for a shared database, with the two conductors on
PostgreSQL: any conductor answers, one operation at a time per server, a conductor killed in the
middle of a resize has it finished or undone by the other, and a build that preempts ends its victim."""

from __future__ import annotations

import pytest
from cloudhelpers import start_cloud, stop_cloud
from test_conductor_service import (  # noqa: F401 - collected again here, on this module's cloud
    flavors,
    test_a_conductor_killed_in_the_middle_of_a_resize_has_it_finished_or_undone_by_the_other,
    test_a_high_priority_build_on_a_full_cloud_preempts_through_either_conductor,
    test_a_second_action_on_a_busy_server_is_refused_by_either_conductor,
    test_a_server_built_on_one_conductor_is_resized_confirmed_and_reverted_through_the_other,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cloud(postgres_server, tmp_path_factory):
    made = start_cloud(postgres_server.create_database("conductors_live"), tmp_path_factory)
    yield made
    for log in stop_cloud(made):
        assert "Traceback" not in log, log
