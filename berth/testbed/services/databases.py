"""Empty databases for the servers a tool starts: SQLite files, a throwaway PostgreSQL, or one the
user names."""

from __future__ import annotations

import os
from collections.abc import Callable

from berth.testbed.errors import TestbedError
from berth.testbed.failover.cluster import PatroniCluster, start_cluster
from berth.testbed.services import postgres


def backend_of(url: str) -> str:
    """The database kind of a SQLAlchemy URL: "sqlite", "postgresql", ..."""
    return "postgresql" if url.startswith("postgres") else url.split(":", 1)[0].split("+", 1)[0]


class Databases:
    """Hands out one empty database per :meth:`new` and removes them in :meth:`close`.

    ``spec``: None or "sqlite" for SQLite files in ``folder``; "postgresql" for databases of a
    throwaway PostgreSQL started on first use (``postgres``, which a fault may restart); "patroni" for
    databases of a Patroni cluster of two PostgreSQL nodes started on first use (``cluster``, whose
    primary a fault may kill; the URLs name every node); anything else
    is a SQLAlchemy URL handed out as it is, every time (``reused``: not ours to throw away, so a tool
    removes its own data from it).
    """

    def __init__(self, spec: str | None, folder: str, log: Callable[[str], None]):
        self.spec = None if spec == "sqlite" else spec
        self.folder = folder
        self.log = log
        self.postgres: postgres.PostgresServer | None = None
        self.cluster: PatroniCluster | None = None
        ours = ("postgresql", "patroni")
        self.kind = backend_of(self.spec) if self.spec and self.spec not in ours else (self.spec or "sqlite")
        self.reused = bool(self.spec) and self.spec not in ours

    def new(self, name: str) -> str:
        """The URL of an empty database called ``name`` (a file or database name)."""
        if not self.spec:
            return f"sqlite:///{os.path.join(self.folder, f'{name}.sqlite')}"
        if self.spec == "patroni":
            if self.cluster is None:
                self.log("starting a Patroni cluster of 2 PostgreSQL nodes")
                try:
                    self.cluster = start_cluster(2)
                except TestbedError:
                    raise
                except Exception as e:  # noqa: BLE001 - any failure of the setup
                    raise TestbedError(f"--database patroni: could not start the cluster: {e}") from e
            return self.cluster.create_database(name)
        if self.spec != "postgresql":
            return self.spec
        if self.postgres is None:
            self.log("starting a throwaway PostgreSQL")
            try:
                self.postgres = postgres.start_postgres()
            except Exception as e:  # noqa: BLE001 - any failure of the setup, e.g. no server programs
                raise TestbedError(f"--database postgresql: could not start PostgreSQL: {e}") from e
        return self.postgres.create_database(name)

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None
        if self.postgres is not None:
            self.postgres.stop()
            self.postgres = None
