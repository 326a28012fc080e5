"""``Flavors``: the sizes servers are made in, with their extra specs (the resource requirements
of docs/scheduler.md, "From flavor and image to query and claim": ``resources:CLASS``,
``trait:NAME``, ``hw:...``, ``pci_passthrough:alias``), checked by building the request spec they
make before they are stored."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from berth.conductor.errors import FLAVOR_DUPLICATE, FLAVOR_EXTRA_SPEC_NOT_FOUND, FLAVOR_INVALID, FLAVOR_NOT_FOUND
from berth.conductor.journal import database_clock, read_through_failover
from berth.conductor.records.tables import Record, flavors, records
from berth.domain.errors import BadRequest, Conflict, NotFound
from berth.scheduler.errors import SchedulerError
from berth.scheduler.request.flavor import Flavor, Image, SchedulerConfig
from berth.scheduler.request.request_spec import build_request_spec
from berth.sql.driver import DriverStatement

_BY_ID_OR_NAME = flavors.select().where(
    sa.or_(flavors.c.id == sa.bindparam("value"), flavors.c.name == sa.bindparam("value"))
)


def to_flavor(row: Mapping[str, Any]) -> Flavor:
    """The scheduler's flavor of a row."""
    return Flavor(
        str(row["name"]),
        int(row["vcpus"]),
        int(row["ram"]),
        root_gb=int(row["disk"]),
        ephemeral_gb=int(row["ephemeral"]),
        swap_mb=int(row["swap"]),
        extra_specs=dict(row["extra_specs"]),
    )


def check(flavor: Flavor, config: SchedulerConfig) -> None:
    """BadRequest unless the flavor makes a request spec (its extra specs read as the scheduler reads them)."""
    try:
        build_request_spec(flavor, Image(), project_id="check", user_id="check", config=config)
    except SchedulerError as e:
        raise BadRequest(f"Invalid flavor {flavor.name!r}: {e}", code=FLAVOR_INVALID) from None


class Flavors:
    def __init__(self, engine: Engine, config: SchedulerConfig):
        self.engine = engine
        self.config = config
        self._now = database_clock(engine.dialect.name)
        # Every build's and resize's look-up, straight to the driver (``berth.sql.driver``).
        self._by_id_or_name = DriverStatement(_BY_ID_OR_NAME, engine.dialect)

    def create(self, fields: Mapping[str, Any]) -> Record:
        row: Record = {
            # An id given as a number is kept as its text, 0 too (only an id not given is made up).
            "id": str(uuid.uuid4() if fields.get("id") is None else fields["id"]),
            "name": str(fields["name"]),
            "vcpus": int(fields["vcpus"]),
            "ram": int(fields["ram"]),
            "disk": int(fields.get("disk", 0)),
            "ephemeral": int(fields.get("ephemeral", 0)),
            "swap": int(fields.get("swap", 0)),
            "extra_specs": {str(k): str(v) for k, v in (fields.get("extra_specs") or {}).items()},
        }
        check(to_flavor(row), self.config)
        try:
            with self.engine.begin() as conn:
                clash = _clash(conn, row)
                if clash is None:
                    conn.execute(flavors.insert().values(**row, created_at=self._now))
        except sa.exc.IntegrityError:
            # Another flavor written between the look and the insert: what it clashes with.
            clash = read_through_failover(self.engine, lambda conn: _clash(conn, row)) or (
                f"A flavor with the id {row['id']!r} or the name {row['name']!r} exists already."
            )
        if clash is not None:
            raise Conflict(clash, code=FLAVOR_DUPLICATE)
        return self.get(row["id"])

    def get(self, id_or_name: str) -> Record:
        """By id, else by name (an operator types names; Nova's clients look them up the same way)."""

        def find(conn: Connection) -> Record | None:
            # One query (a build looks its flavor up by name): the row with that id comes first.
            rows = self._by_id_or_name.records(conn, {"value": id_or_name})
            return next((row for row in rows if row["id"] == id_or_name), rows[0] if rows else None)

        found = read_through_failover(self.engine, find)
        if found is not None:
            return found
        raise NotFound(f"No flavor with the id or name {id_or_name!r}.", code=FLAVOR_NOT_FOUND)

    def all(self) -> list[Record]:
        query = flavors.select().order_by(flavors.c.vcpus, flavors.c.ram, flavors.c.name)
        return read_through_failover(self.engine, lambda conn: records(conn.execute(query).mappings()))

    def delete(self, id_or_name: str) -> None:
        """Servers keep a copy of their flavor (as Nova's do): deleting one never touches them."""
        row = self.get(id_or_name)
        with self.engine.begin() as conn:
            conn.execute(flavors.delete().where(flavors.c.id == row["id"]))

    def set_extra_specs(self, id_or_name: str, specs: Mapping[str, str]) -> Record:
        """Merged into the flavor's, checked together before they are written."""
        return self._change_specs(id_or_name, lambda current: {**current, **specs})

    def extra_spec(self, id_or_name: str, key: str) -> str:
        """The value of one extra spec of the flavor; NotFound (the extra spec's code) without it."""
        row = self.get(id_or_name)
        if key not in row["extra_specs"]:
            raise _no_extra_spec(row, key)
        return str(row["extra_specs"][key])

    def unset_extra_spec(self, id_or_name: str, key: str) -> Record:
        row = self.get(id_or_name)
        if key not in row["extra_specs"]:
            raise _no_extra_spec(row, key)
        return self._change_specs(id_or_name, lambda current: {k: v for k, v in current.items() if k != key})

    def _change_specs(self, id_or_name: str, change: Any) -> Record:
        row = self.get(id_or_name)
        specs = {str(k): str(v) for k, v in change(dict(row["extra_specs"])).items()}
        check(to_flavor({**row, "extra_specs": specs}), self.config)
        with self.engine.begin() as conn:
            conn.execute(flavors.update().where(flavors.c.id == row["id"]).values(extra_specs=specs))
        return self.get(str(row["id"]))


def _no_extra_spec(row: Record, key: str) -> NotFound:
    return NotFound(f"Flavor {row['name']!r} has no extra spec {key!r}.", code=FLAVOR_EXTRA_SPEC_NOT_FOUND)


def _clash(conn: Connection, row: Record) -> str | None:
    """Why a new flavor may not be written beside the others, or None. A flavor is referred to by
    its id or its name (``Flavors.get``, a server's ``flavorRef``, the commands), so neither may be
    any other flavor's id or name: a new flavor whose id were another's name would take that
    name's place in every look-up."""
    new_id, new_name = row["id"], row["name"]
    found = conn.execute(
        sa.select(flavors.c.id, flavors.c.name).where(
            sa.or_(flavors.c.id.in_([new_id, new_name]), flavors.c.name.in_([new_id, new_name]))
        )
    ).all()
    lookup = "flavors are found by id or name"
    for other_id, other_name in found:
        if other_id == new_id:
            return f"A flavor with the id {new_id!r} exists already."
        if other_name == new_name:
            return f"A flavor named {new_name!r} exists already."
    for other_id, other_name in found:
        if other_name == new_id:
            return f"A flavor named {new_id!r} exists already: a flavor's id may not be another's name ({lookup})."
        if other_id == new_name:
            return (
                f"A flavor with the id {new_name!r} exists already: a flavor's name may not be another's id ({lookup})."
            )
    return None
