"""A server group deleted while a server joins it: the delete is refused (the server counted as a
member) or the server is refused (no group), never both done, which left a server naming a group
that is gone. On both databases, through the control plane over a real service and agents."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa
from conductorhelpers import PLAIN

from berth.conductor.control.plane import ControlPlane, Who
from berth.conductor.records.tables import server_groups, servers
from berth.domain.errors import Conflict, NotFound
from berth.scheduler.settings import SelectionSettings

pytestmark = pytest.mark.slow

WHO = Who("admin", "admin")


@pytest.fixture(params=["sqlite", "postgresql"])
def plane(request, placement, cloud, tmp_path):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'conductor.sqlite'}"
    else:
        url = request.getfixturevalue("postgres_server").create_database(f"groups_{tmp_path.name[-8:]}".lower())
    made = ControlPlane(url, placement, selection=SelectionSettings(enabled_filters=[]))
    for name, agent in sorted(cloud.items()):
        made.register_host(name, agent.url, "zone-1", agent.token, "agent", admin=False)
    made.flavors.create({"name": PLAIN.name, "vcpus": 1, "ram": 512, "disk": 1})
    yield made
    made.close()


def _rows(plane: ControlPlane, table: sa.Table) -> list[tuple]:
    with plane.journal.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(sa.select(table))]


def test_a_server_joining_a_group_deleted_after_it_was_read_is_refused_and_leaves_nothing(plane, monkeypatch):
    group = plane.groups.create("gone", "anti-affinity", {}, "admin", "admin")
    read = plane.groups.scheduling

    def read_then_deleted(group_id: str):
        found = read(group_id)
        plane.groups.delete(group_id)  # the racing delete, committed between the read and the write
        return found

    monkeypatch.setattr(plane.groups, "scheduling", read_then_deleted)
    with pytest.raises(NotFound) as refused:
        plane.create_servers(WHO, name="late", flavor_ref=PLAIN.name, group_id=group)
    assert refused.value.code == "berth.server_group.not_found"
    assert _rows(plane, servers) == []
    assert plane.journal.find() == []


def test_a_group_deleted_while_servers_join_it_is_never_gone_under_a_member(plane):
    outcomes: list[str] = []
    for round_ in range(6):
        group = plane.groups.create(f"g{round_}", "anti-affinity", {}, "admin", "admin")
        start = threading.Barrier(2)

        def join(group: str = group, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                plane.create_servers(WHO, name="joiner", flavor_ref=PLAIN.name, group_id=group)
                outcomes.append("joined")
            except NotFound:
                outcomes.append("no group")

        def delete(group: str = group, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                plane.groups.delete(group)
                outcomes.append("deleted")
            except Conflict:
                outcomes.append("in use")

        threads = [threading.Thread(target=join), threading.Thread(target=delete)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        groups = {row[0] for row in _rows(plane, server_groups)}
        members = plane.servers.in_group(group)
        assert group in groups or not members, (round_, outcomes[-2:])
    assert set(outcomes) <= {"joined", "no group", "deleted", "in use"}
    assert len(outcomes) == 12
