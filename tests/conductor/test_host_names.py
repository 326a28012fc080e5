"""A host's name and the agent that holds it (``berth.conductor.records.hosts``), on both databases:
the same agent (the same id) is taken at whatever address it gives; another agent is refused the
name while the host is up, with the address of the one that holds it, and takes it over once the
host is down; a host registered before agents had ids (a row the migration found) is adopted by
the first agent that gives one. A registration only checked is refused as it would be, and writes
nothing."""

from __future__ import annotations

import logging
import uuid

import pytest
import sqlalchemy as sa
from alembic import command

from berth.conductor import migrate
from berth.conductor.journal import Journal
from berth.conductor.records import tables
from berth.conductor.records.hosts import HostEntry, Hosts, NameTaken, RegisteredByAnother

FIRST = str(uuid.uuid4())
SECOND = str(uuid.uuid4())
DOWN_AFTER = 30.0


@pytest.fixture
def hosts(journal_on_each_database) -> Hosts:
    return Hosts(journal_on_each_database.engine, down_after=DOWN_AFTER)


def _silent(hosts: Hosts, name: str, seconds: float) -> None:
    """The host's last heartbeat moved ``seconds`` back, as if its agent had been silent that long."""
    with hosts.engine.begin() as conn:
        conn.execute(
            tables.hosts.update()
            .where(tables.hosts.c.name == name)
            .values(heartbeat=tables.hosts.c.heartbeat - sa.literal(seconds))
        )


def test_the_same_agent_restarted_at_another_address_is_taken_there(hosts):
    hosts.register("h", "http://first:1", "zone-1", None, "agent", admin=False, agent_id=FIRST)
    _silent(hosts, "h", 5.0)  # restarting, still up
    host, changed = hosts.register("h", "http://first:2", "zone-1", None, "agent", admin=False, agent_id=FIRST)
    assert changed and (host.url, host.agent_id) == ("http://first:2", FIRST)
    assert host.up and host.silent_for < 5.0


def test_another_agent_is_refused_the_name_while_the_host_is_up_and_the_host_is_left_as_it_was(hosts):
    hosts.register("h", "http://first:1", "zone-1", "first-token", "agent", admin=False, agent_id=FIRST)
    _silent(hosts, "h", DOWN_AFTER - 10.0)
    for other in (SECOND, None):  # an agent that gives no id is another agent too
        with pytest.raises(NameTaken) as refused:
            hosts.register("h", "http://second:1", "zone-2", "second-token", "agent", admin=False, agent_id=other)
        assert refused.value.status == 409 and refused.value.code == "berth.host.name_taken"
        assert "held by the agent at http://first:1, whose" in refused.value.detail, refused.value.detail
    host = hosts.get("h")
    assert (host.url, host.zone, host.agent_token, host.agent_id) == ("http://first:1", "zone-1", "first-token", FIRST)
    assert host.silent_for >= DOWN_AFTER - 11.0  # the refusals were no heartbeat of the host
    # The agent that holds it goes on beating.
    host, changed = hosts.register("h", "http://first:1", "zone-1", "first-token", "agent", admin=False, agent_id=FIRST)
    assert not changed and host.silent_for < 5.0


def test_another_agent_takes_the_name_over_once_the_host_is_down(hosts, caplog):
    hosts.register("h", "http://first:1", "zone-1", None, "agent", admin=False, agent_id=FIRST)
    _silent(hosts, "h", DOWN_AFTER + 10.0)
    assert hosts.down() == frozenset({"h"})
    with caplog.at_level(logging.WARNING, logger="berth.conductor.records.hosts"):
        host, changed = hosts.register("h", "http://second:1", "zone-1", None, "agent", admin=False, agent_id=SECOND)
    assert changed and (host.url, host.agent_id, host.up) == ("http://second:1", SECOND, True)
    [said] = [r.getMessage() for r in caplog.records if "taken over" in r.getMessage()]
    assert f"agent {SECOND} at http://second:1" in said and f"agent {FIRST} at http://first:1" in said, said
    # The first agent, back, is the one refused now.
    with pytest.raises(NameTaken):
        hosts.register("h", "http://first:1", "zone-1", None, "agent", admin=False, agent_id=FIRST)


def test_a_host_without_an_agent_id_is_adopted_by_the_first_agent_that_gives_one(hosts):
    hosts.register("h", "http://old:1", "zone-1", None, "agent", admin=False)  # as registered before ids
    assert hosts.get("h").agent_id is None
    host, _ = hosts.register("h", "http://new:1", "zone-1", None, "agent", admin=False, agent_id=FIRST)
    assert (host.url, host.agent_id) == ("http://new:1", FIRST)
    with pytest.raises(NameTaken):
        hosts.register("h", "http://second:1", "zone-1", None, "agent", admin=False, agent_id=SECOND)


def test_another_user_is_refused_as_before_and_not_told_where_the_agent_answers(hosts):
    hosts.register("h", "http://first:1", "zone-1", None, "agent", admin=False, agent_id=FIRST)
    with pytest.raises(RegisteredByAnother) as refused:
        hosts.register("h", "http://second:1", "zone-1", None, "mallory", admin=False, agent_id=SECOND)
    assert "http://first:1" not in refused.value.detail
    # An admin speaks for any user's host, not for another agent than the one that holds it.
    with pytest.raises(NameTaken):
        hosts.register("h", "http://second:1", "zone-1", None, "admin", admin=True, agent_id=SECOND)


def test_a_registration_only_checked_meets_the_same_refusals_and_writes_nothing(hosts):
    hosts.check("new", HostEntry("http://first:1", "zone-1", None, FIRST), "agent", admin=False)
    assert hosts.names() == frozenset()
    hosts.register("h", "http://first:1", "zone-1", None, "agent", admin=False, agent_id=FIRST)
    _silent(hosts, "h", 10.0)
    hosts.check("h", HostEntry("http://first:2", "zone-1", None, FIRST), "agent", admin=False)
    with pytest.raises(NameTaken):
        hosts.check("h", HostEntry("http://second:1", "zone-1", None, SECOND), "agent", admin=False)
    with pytest.raises(RegisteredByAnother):
        hosts.check("h", HostEntry("http://first:1", "zone-1", None, FIRST), "mallory", admin=False)
    host = hosts.get("h")
    assert (host.url, host.agent_id) == ("http://first:1", FIRST) and host.silent_for >= 9.0
    _silent(hosts, "h", DOWN_AFTER)
    hosts.check("h", HostEntry("http://second:1", "zone-1", None, SECOND), "agent", admin=False)
    assert hosts.get("h").agent_id == FIRST


def test_many_registrations_at_once_beat_only_the_hosts_their_own_agent_holds(hosts):
    hosts.register("h", "http://first:1", "zone-1", None, "agent", admin=False, agent_id=FIRST)
    _silent(hosts, "h", 10.0)
    other = HostEntry("http://first:1", "zone-1", None, SECOND)
    assert hosts.beat_unchanged({"h": other}, "agent", admin=False) == set()
    assert hosts.get("h").silent_for >= 9.0
    same = HostEntry("http://first:1", "zone-1", None, FIRST)
    assert hosts.beat_unchanged({"h": same}, "agent", admin=False) == {"h"}
    assert hosts.get("h").silent_for < 5.0


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'conductors.sqlite'}"
    return request.getfixturevalue("postgres_server").create_database(f"host_names_{uuid.uuid4().hex[:8]}")


def test_a_host_registered_before_the_migration_is_adopted_by_the_first_agent_that_registers(database_url):
    engine = sa.create_engine(database_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        command.upgrade(migrate.alembic_config(conn), "0003")
        conn.execute(
            sa.text(
                "INSERT INTO conductor_hosts (name, url, zone, disabled, registered_by, registered_at, heartbeat) "
                "VALUES ('h1', 'http://h1:1', 'zone-7', false, 'agent', 0, 0)"
            )
        )
    engine.dispose()
    journal = Journal(database_url)  # upgrades the database to the newest revision
    try:
        hosts = Hosts(journal.engine, down_after=DOWN_AFTER)
        assert hosts.get("h1").agent_id is None
        host, _ = hosts.register("h1", "http://h1:2", "zone-7", None, "agent", admin=False, agent_id=FIRST)
        assert (host.url, host.agent_id, host.up) == ("http://h1:2", FIRST, True)
        with pytest.raises(NameTaken):
            hosts.register("h1", "http://h1:3", "zone-7", None, "agent", admin=False, agent_id=SECOND)
    finally:
        journal.close()
