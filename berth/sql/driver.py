"""Statements sent straight to the driver, on a SQLAlchemy connection's own DBAPI connection and
inside its transaction, for the hottest writes.

Running a prebuilt SQLAlchemy statement still costs tens of microseconds of Python each time (its
compiled form looked up in a cache, an execution context made, every parameter processed): a
conductor's journal write spent more there than in SQLite itself. ``DriverStatement`` compiles a
Core statement once for the engine's dialect and keeps the SQL text, the order of its parameters
and the bind processors of its typed ones (JSON, say); each run only fills the parameters and calls
the driver.

A driver's error is raised as the SQLAlchemy exception it would have been (``driver_error``), with a
lost connection invalidated, so that callers that retry after a lost connection, or catch
``IntegrityError``, see no difference.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlalchemy.engine.interfaces import DBAPICursor, DBAPIModule, Dialect
from sqlalchemy.sql.compiler import SQLCompiler

# A row as the driver returns it.
Row = tuple[Any, ...]


def driver_error(
    conn: Connection, error: DBAPIModule.Error, text: str, params: Any, cursor: DBAPICursor
) -> sa.exc.StatementError:
    """``error`` from the driver as the SQLAlchemy exception it would have been."""
    dbapi_connection = conn.connection.dbapi_connection
    invalidated = conn.dialect.is_disconnect(error, dbapi_connection, cursor)
    if invalidated:
        conn.invalidate(error)
    return sa.exc.DBAPIError.instance(
        text,
        params,
        error,
        conn.dialect.loaded_dbapi.Error,
        connection_invalidated=invalidated,
        dialect=conn.dialect,
    )


class DriverStatement:
    """A Core statement compiled once for ``dialect``, run on the driver's cursor of the connection
    it is given. Parameters are passed by bind name; those the statement fixed (its literal values)
    are filled in."""

    def __init__(self, statement: sa.ClauseElement, dialect: Dialect):
        compiled = statement.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)  # a Core statement's
        # Parameters expanded or rendered at execution (IN lists, some LIMITs) need SQLAlchemy's
        # own execution; the journal's statements have none.
        if compiled.post_compile_params or compiled.literal_execute_params or compiled.escaped_bind_names:
            raise ValueError(f"a statement whose parameters are rendered at execution: {compiled.string}")
        self.text = compiled.string
        self._names: Sequence[str] | None = compiled.positiontup if compiled.positional else None
        self._processors: dict[str, Callable[[Any], Any]] = {}
        self._fixed: dict[str, Any] = {}
        for name, bind in compiled.binds.items():
            process = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if bind.required:
                if process is not None:
                    self._processors[name] = process
            else:
                value = bind.effective_value
                self._fixed[name] = process(value) if process is not None else value

    def rows(self, conn: Connection, params: Mapping[str, Any]) -> list[Row]:
        """The statement run in ``conn``'s transaction: the rows it returns (none when it returns
        no rows)."""
        values = {**self._fixed, **params}
        for name, process in self._processors.items():
            values[name] = process(values[name])
        args: Any = [values[name] for name in self._names] if self._names is not None else values
        dbapi_connection = conn.connection.dbapi_connection
        assert dbapi_connection is not None  # held by the connection for as long as it is open
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(self.text, args)
            return list(cursor.fetchall()) if cursor.description is not None else []
        except conn.dialect.loaded_dbapi.Error as error:
            raise driver_error(conn, error, self.text, args, cursor) from error
        finally:
            cursor.close()
