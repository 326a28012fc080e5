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
    conn: Connection, error: DBAPIModule.Error, text: str, params: Any, cursor: DBAPICursor | None
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


def driver_cursor(conn: Connection, text: str, params: Any = ()) -> DBAPICursor:
    """A cursor of ``conn``'s driver connection, to run ``text`` on. A connection the database
    closed (a restart) refuses even the cursor: raised as SQLAlchemy's lost connection, as a refusal
    of the statement itself is."""
    dbapi_connection = conn.connection.dbapi_connection
    assert dbapi_connection is not None  # held by the connection for as long as it is open
    try:
        return dbapi_connection.cursor()
    except conn.dialect.loaded_dbapi.Error as error:
        raise driver_error(conn, error, text, params, None) from error


class DriverStatement:
    """A Core statement compiled once for ``dialect``, run on the driver's cursor of the connection
    it is given. Parameters are passed by bind name; those the statement fixed (its literal values)
    are filled in. What it returns comes back as SQLAlchemy would have typed it."""

    def __init__(self, statement: sa.ClauseElement, dialect: Dialect):
        compiled = statement.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)  # a Core statement's
        # Parameters expanded or rendered at execution (IN lists, some LIMITs) need SQLAlchemy's
        # own execution; the statements sent this way have none.
        if compiled.post_compile_params or compiled.literal_execute_params or compiled.escaped_bind_names:
            raise ValueError(f"a statement whose parameters are rendered at execution: {compiled.string}")
        self.text = compiled.string
        self._names: Sequence[str] | None = compiled.positiontup if compiled.positional else None
        # What it returns (a SELECT's columns, an INSERT's or UPDATE's RETURNING), each through its
        # type's result processor (a JSON column's text parsed on SQLite, say), which some types
        # choose by the driver's type of the column: made at the first run.
        self._dialect = dialect
        returned = list(getattr(statement, "exported_columns", ()))
        self._returned = [column.type.dialect_impl(dialect) for column in returned]
        self.columns: tuple[str, ...] = tuple(str(column.key) for column in returned)
        self._results: list[tuple[int, Callable[[Any], Any]]] | None = None
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
        cursor = driver_cursor(conn, self.text, args)
        try:
            cursor.execute(self.text, args)
            description = cursor.description
            found = list(cursor.fetchall()) if description is not None else []
        except conn.dialect.loaded_dbapi.Error as error:
            raise driver_error(conn, error, self.text, args, cursor) from error
        finally:
            cursor.close()
        if self._results is None and description is not None:
            self._results = [
                (index, process)
                for index, (kind, column) in enumerate(zip(self._returned, description, strict=True))
                if (process := kind.result_processor(self._dialect, column[1])) is not None
            ]
        if not self._results:
            return found
        processed = []
        for row in found:
            columns = list(row)
            for index, process in self._results:
                columns[index] = process(columns[index])
            processed.append(tuple(columns))
        return processed

    def records(self, conn: Connection, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """As ``rows``, each row by column name."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows(conn, params)]
