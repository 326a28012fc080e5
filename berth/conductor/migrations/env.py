"""Alembic environment of the conductors' database: migrations always run on a connection handed in
by berth.conductor.migrate, and keep their revision in a table of their own (the service's
database has its own ``alembic_version``; the two may share a database)."""

from alembic import context

from berth.conductor.journal import metadata as journal_metadata
from berth.conductor.migrate import VERSION_TABLE
from berth.conductor.records.tables import metadata as records_metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=[journal_metadata, records_metadata],
    version_table=VERSION_TABLE,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
