"""``Hosts``: the compute hosts whose agents registered, where their agents answer, their zone,
whether an operator disabled them, and whether they are up (a heartbeat within ``down_after``
seconds, by the database's clock as the journal's heartbeats are).

An agent registers with the same call it beats with (``PUT /hosts/{name}``): nothing is to be
listed in advance. The first registration binds the host to the user who made it; any other user
is refused (an admin excepted), so that nobody registers, moves or retires a host in another's name.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from berth.conductor.errors import HOST_IN_USE, HOST_NOT_FOUND, HOST_REGISTERED_BY_ANOTHER
from berth.conductor.journal import database_clock, read_through_failover
from berth.conductor.records.tables import hosts, record, servers
from berth.domain.errors import BerthError, Conflict, NotFound

# Where a host's agent answers, its zone and its token, as a registration gives them.
HostEntry = tuple[str, str | None, str | None]


class RegisteredByAnother(BerthError):
    status = 403
    code = HOST_REGISTERED_BY_ANOTHER


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
        # Every host's agent, read all at once every few seconds (``RegisteredAgents``).
        self._addresses = sa.select(hosts.c.name, hosts.c.url, hosts.c.agent_token)
        # Down as ``_host`` says (silent longer than ``down_after``): read every second by each
        # conductor's scheduler, which needs the names alone, not every host's row.
        self._down = sa.select(hosts.c.name).where(self._now - hosts.c.heartbeat > sa.bindparam("down_after"))

    def register(
        self, name: str, url: str, zone: str | None, agent_token: str | None, user_id: str, *, admin: bool
    ) -> tuple[Host, bool]:
        """The host registered (or beating again) at ``url``; whether it is new or had changed its url
        or zone (what the caller has to act on: the zone's aggregate)."""
        try:
            changed = self._register(name, url, zone, agent_token, user_id, admin)
        except sa.exc.IntegrityError:  # two conductors took its first registration at once: it is there now
            changed = self._register(name, url, zone, agent_token, user_id, admin)
        return self.get(name), changed

    def _register(
        self, name: str, url: str, zone: str | None, agent_token: str | None, user_id: str, admin: bool
    ) -> bool:
        with self.engine.begin() as conn:
            row = conn.execute(hosts.select().where(hosts.c.name == name).with_for_update()).mappings().first()
            if row is None:
                conn.execute(
                    hosts.insert().values(
                        name=name,
                        url=url,
                        agent_token=agent_token,
                        zone=zone,
                        disabled=False,
                        disabled_reason=None,
                        registered_by=user_id,
                        registered_at=self._now,
                        heartbeat=self._now,
                    )
                )
                return True
            if row["registered_by"] != user_id and not admin:
                raise RegisteredByAnother(
                    f"Host {name} was registered by another user; only that user or an admin may speak for it."
                )
            conn.execute(
                hosts.update()
                .where(hosts.c.name == name)
                .values(url=url, agent_token=agent_token, zone=zone, heartbeat=self._now)
            )
            return bool(row["url"] != url or row["zone"] != zone)

    def beat_unchanged(self, entries: Mapping[str, HostEntry], user_id: str, *, admin: bool) -> set[str]:
        """One heartbeat, in one statement, for each host of ``entries`` registered already at the same
        url, zone and token by this user (any user, for an admin); the names beaten. The others
        (new, moved, or another user's) are left to ``register``, which tells them apart."""
        if not entries:
            return set()
        with self.engine.begin() as conn:
            rows = conn.execute(
                sa.select(hosts.c.name, hosts.c.url, hosts.c.zone, hosts.c.agent_token, hosts.c.registered_by).where(
                    hosts.c.name.in_(list(entries))
                )
            ).all()
            same = {
                r.name
                for r in rows
                if (r.url, r.zone, r.agent_token) == entries[r.name] and (admin or r.registered_by == user_id)
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
        silent_for=silent,
        up=silent <= down_after,
    )
