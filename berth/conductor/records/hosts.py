"""``Hosts``: the compute hosts whose agents registered, where their agents answer, their zone,
whether an operator disabled them, and whether they are up (a heartbeat within ``down_after``
seconds, by the database's clock as the journal's heartbeats are).

An agent registers with the same call it beats with (``PUT /hosts/{name}``): nothing is to be
listed in advance. The first registration binds the host to the user who made it; any other user
is refused (an admin excepted), so that nobody registers, moves or retires a host in another's name.

A registration also names the agent (its id, a UUID it keeps in its state folder), and the name is
that agent's while the host is up: the same agent restarted is taken at whatever address it now
gives, and another agent is refused (``NameTaken``, 409) rather than taking the host's address over
at each of its beats, each agent in turn. Once the host is down (its agent silent longer than
``down_after``), the next agent to register takes the name over, as a host reinstalled does. A host
registered before agents had ids has none, and the first agent to register with one adopts it. An
agent that starts has its registration checked first (``check``: the same refusals, nothing
written), so that a second one stops before it serves.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Engine, RowMapping

from berth.conductor.errors import HOST_IN_USE, HOST_NAME_TAKEN, HOST_NOT_FOUND, HOST_REGISTERED_BY_ANOTHER
from berth.conductor.journal import database_clock, read_through_failover
from berth.conductor.records.tables import hosts, record, servers
from berth.domain.errors import BerthError, Conflict, NotFound

LOG = logging.getLogger(__name__)


class HostEntry(NamedTuple):
    """A host as its registration gives it."""

    # Where its agent answers.
    url: str
    zone: str | None
    # The token its agent's API asks of callers.
    agent_token: str | None
    # The agent's id (None: an agent that gives none).
    agent_id: str | None = None


class RegisteredByAnother(BerthError):
    status = 403
    code = HOST_REGISTERED_BY_ANOTHER


class NameTaken(BerthError):
    """Another agent, whose heartbeats are fresh, holds the host's name."""

    status = 409
    code = HOST_NAME_TAKEN


@dataclass(frozen=True)
class Host:
    name: str
    url: str
    agent_token: str | None
    zone: str | None
    disabled: bool
    disabled_reason: str | None
    registered_by: str
    registered_at: float
    heartbeat: float
    # The id of the agent that holds the name (None: one registered before agents had ids).
    agent_id: str | None
    # Seconds since the last heartbeat, by the database's clock.
    silent_for: float
    up: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "url": self.url,
            "zone": self.zone,
            "status": "disabled" if self.disabled else "enabled",
            "disabled_reason": self.disabled_reason,
            "state": "up" if self.up else "down",
            "registered_by": self.registered_by,
            "last_heartbeat_seconds_ago": round(self.silent_for, 1),
        }


class Hosts:
    def __init__(self, engine: Engine, down_after: float):
        self.engine = engine
        self.down_after = down_after
        self._now = database_clock(engine.dialect.name)
        # Every step of an operation looks its hosts' agents up: built once (see the journal's
        # ``_Statements``).
        self._by_name = self._query(hosts.c.name == sa.bindparam("host_name"))
        # A registration's read of the row it may write (locked on PostgreSQL), with how long its
        # agent has been silent.
        self._for_registration = self._by_name.with_for_update()
        # Every host's agent, read all at once every few seconds (``RegisteredAgents``).
        self._addresses = sa.select(hosts.c.name, hosts.c.url, hosts.c.agent_token)
        # Down as ``_host`` says (silent longer than ``down_after``): read every second by each
        # conductor's scheduler, which needs the names alone, not every host's row.
        self._down = sa.select(hosts.c.name).where(self._now - hosts.c.heartbeat > sa.bindparam("down_after"))

    def register(
        self,
        name: str,
        url: str,
        zone: str | None,
        agent_token: str | None,
        user_id: str,
        *,
        admin: bool,
        agent_id: str | None = None,
    ) -> tuple[Host, bool]:
        """The host registered (or beating again) at ``url`` by the agent ``agent_id``; whether it is
        new or had changed its url or zone (what the caller has to act on: the zone's aggregate).
        ``NameTaken`` while another agent holds the name and the host is up."""
        entry = HostEntry(url, zone, agent_token, agent_id)
        first_try = True
        while True:
            try:
                changed = self._register(name, entry, user_id, admin)
            except sa.exc.IntegrityError:  # two conductors took its first registration at once: it is there now
                if not first_try:
                    raise
                first_try = False
                continue
            if changed is not None:
                return self.get(name), changed

    def _register(self, name: str, entry: HostEntry, user_id: str, admin: bool) -> bool | None:
        """One try at ``register``; None when another registration changed the row between this
        one's read and its write (on SQLite, whose read locks nothing), to be read again: which
        agent holds the name is decided on the row as it is."""
        with self.engine.begin() as conn:
            row = conn.execute(self._for_registration, {"host_name": name}).mappings().first()
            if row is None:
                conn.execute(
                    hosts.insert().values(
                        name=name,
                        url=entry.url,
                        agent_token=entry.agent_token,
                        zone=entry.zone,
                        disabled=False,
                        disabled_reason=None,
                        registered_by=user_id,
                        registered_at=self._now,
                        heartbeat=self._now,
                        agent_id=entry.agent_id,
                    )
                )
                return True
            self._refuse(name, row, entry, user_id, admin)
            holder = row["agent_id"]
            written = conn.execute(
                hosts.update()
                .where(
                    hosts.c.name == name,
                    hosts.c.agent_id.is_not_distinct_from(holder),
                    hosts.c.heartbeat == row["heartbeat"],
                )
                .values(
                    url=entry.url,
                    agent_token=entry.agent_token,
                    zone=entry.zone,
                    heartbeat=self._now,
                    agent_id=entry.agent_id,
                )
            ).rowcount
        if not written:
            return None
        if holder is not None and holder != entry.agent_id:
            LOG.warning(
                "host %s taken over by agent %s at %s: its agent %s at %s had been silent for %.0f s (the host "
                "down); a host replaced or reinstalled",
                name,
                entry.agent_id or "(no id)",
                entry.url,
                holder,
                row["url"],
                row["silent_for"],
            )
        elif holder is None and entry.agent_id is not None:
            LOG.info(
                "host %s, registered before agents had ids, adopted by agent %s at %s", name, entry.agent_id, entry.url
            )
        return bool(row["url"] != entry.url or row["zone"] != entry.zone)

    def check(self, name: str, entry: HostEntry, user_id: str, *, admin: bool) -> None:
        """What ``register`` would refuse the registration ``entry`` by ``user_id``, raised, and
        nothing written: an agent asks before it reports its host or serves anything, and stops
        there when another agent holds the name."""
        row = read_through_failover(
            self.engine, lambda conn: conn.execute(self._by_name, {"host_name": name}).mappings().first()
        )
        if row is not None:
            self._refuse(name, row, entry, user_id, admin)

    def _refuse(self, name: str, row: RowMapping, entry: HostEntry, user_id: str, admin: bool) -> None:
        """Raise what the registration ``entry`` by ``user_id`` meets on the host's ``row``: the host
        of another user (an admin speaks for any), or a name another agent holds while the host is up
        (whatever the user)."""
        if row["registered_by"] != user_id and not admin:
            raise RegisteredByAnother(
                f"Host {name} was registered by another user; only that user or an admin may speak for it."
            )
        holder = row["agent_id"]
        silent = max(0.0, float(row["silent_for"]))
        if holder is not None and holder != entry.agent_id and silent <= self.down_after:
            raise NameTaken(
                f"Host {name} is held by the agent at {row['url']}, whose last heartbeat was {silent:.1f} s ago; "
                f"another agent may take the name only once that one has been silent for {self.down_after:g} s "
                "(the host down)."
            )

    def beat_unchanged(self, entries: Mapping[str, HostEntry], user_id: str, *, admin: bool) -> set[str]:
        """One heartbeat, in one statement, for each host of ``entries`` registered already at the same
        url, zone and token, by the same agent, by this user (any user, for an admin); the names
        beaten. The others (new, moved, another agent's or another user's) are left to ``register``,
        which tells them apart."""
        if not entries:
            return set()
        with self.engine.begin() as conn:
            rows = conn.execute(
                sa.select(
                    hosts.c.name,
                    hosts.c.url,
                    hosts.c.zone,
                    hosts.c.agent_token,
                    hosts.c.agent_id,
                    hosts.c.registered_by,
                ).where(hosts.c.name.in_(list(entries)))
            ).all()
            same = {
                r.name
                for r in rows
                if HostEntry(r.url, r.zone, r.agent_token, r.agent_id) == entries[r.name]
                and (admin or r.registered_by == user_id)
            }
            if same:
                conn.execute(hosts.update().where(hosts.c.name.in_(sorted(same))).values(heartbeat=self._now))
        return same

    def get(self, name: str) -> Host:
        found = self._rows(self._by_name, {"host_name": name})
        if not found:
            raise NotFound(f"No host named {name} has registered.", code=HOST_NOT_FOUND)
        return found[0]

    def zones(self) -> set[str]:
        """Every zone some registered host is in."""
        query = sa.select(hosts.c.zone).distinct()
        return read_through_failover(self.engine, lambda conn: {z for (z,) in conn.execute(query) if z})

    def zones_of(self, names: Collection[str]) -> dict[str, str]:
        """The zone of each of the hosts ``names`` that is in one."""
        if not names:
            return {}
        query = sa.select(hosts.c.name, hosts.c.zone).where(hosts.c.name.in_(sorted(names)), hosts.c.zone.is_not(None))
        return read_through_failover(self.engine, lambda conn: {n: z for n, z in conn.execute(query)})

    def all(self) -> list[Host]:
        return self._read(sa.true())

    def addresses(self) -> dict[str, tuple[str, str | None]]:
        """Every registered host's agent address and token, by name."""
        query = self._addresses
        return read_through_failover(
            self.engine, lambda conn: {name: (url, token) for name, url, token in conn.execute(query)}
        )

    def names(self) -> frozenset[str]:
        """Every registered host's name."""
        query = sa.select(hosts.c.name)
        return read_through_failover(self.engine, lambda conn: frozenset(conn.execute(query).scalars()))

    def down(self) -> frozenset[str]:
        """The names of the hosts that are down (``Host.up`` false)."""
        query, parameters = self._down, {"down_after": self.down_after}
        return read_through_failover(self.engine, lambda conn: frozenset(conn.execute(query, parameters).scalars()))

    def _read(self, where: sa.ColumnElement[bool]) -> list[Host]:
        return self._rows(self._query(where))

    def _query(self, where: sa.ColumnElement[bool]) -> sa.Select[Any]:
        silent = (self._now - hosts.c.heartbeat).label("silent_for")
        return sa.select(hosts, silent).where(where).order_by(hosts.c.name)

    def _rows(self, query: sa.Select[Any], parameters: Mapping[str, Any] | None = None) -> list[Host]:
        rows = read_through_failover(self.engine, lambda conn: conn.execute(query, parameters).mappings().all())
        return [_host(record(r), self.down_after) for r in rows]

    def set_disabled(self, name: str, disabled: bool, reason: str | None = None) -> Host:
        with self.engine.begin() as conn:
            changed = conn.execute(
                hosts.update()
                .where(hosts.c.name == name)
                .values(disabled=disabled, disabled_reason=reason if disabled else None)
            ).rowcount
        if not changed:
            raise NotFound(f"No host named {name} has registered.", code=HOST_NOT_FOUND)
        return self.get(name)

    def retire(self, name: str, user_id: str, *, admin: bool) -> None:
        """The host forgotten; refused while any server is on it."""
        host = self.get(name)
        if host.registered_by != user_id and not admin:
            raise RegisteredByAnother(
                f"Host {name} was registered by another user; only that user or an admin may retire it."
            )
        with self.engine.begin() as conn:
            on_it = conn.execute(
                sa.select(sa.func.count()).where(servers.c.host == name, servers.c.deleted_at.is_(None))
            ).scalar_one()
            if on_it:
                raise Conflict(f"Host {name} still has {on_it} server(s); move or delete them first.", code=HOST_IN_USE)
            conn.execute(hosts.delete().where(hosts.c.name == name))


def _host(row: Mapping[str, Any], down_after: float) -> Host:
    silent = max(0.0, float(row["silent_for"]))
    return Host(
        name=row["name"],
        url=row["url"],
        agent_token=row["agent_token"],
        zone=row["zone"],
        disabled=bool(row["disabled"]),
        disabled_reason=row["disabled_reason"],
        registered_by=row["registered_by"],
        registered_at=float(row["registered_at"]),
        heartbeat=float(row["heartbeat"]),
        agent_id=row["agent_id"],
        silent_for=silent,
        up=silent <= down_after,
    )
