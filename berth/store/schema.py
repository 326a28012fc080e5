"""The relational schema of Berth's books.

The tables follow Placement's data model (providers, inventories, allocations, consumers, traits,
aggregates) with one deliberate addition: ``inventories.used`` keeps the sum of the allocations
against that inventory.  It is maintained in the same transaction as every allocation write, with a
conditional UPDATE that refuses to go over capacity, so that capacity checks and candidate searches
never have to sum the allocations table.
"""

from __future__ import annotations

import datetime
import secrets

import sqlalchemy as sa

from berth.domain.capacity import headroom_sql

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


def new_revision() -> int:
    """A starting revision for a new provider: random, with room left to count up in 63 bits."""
    return secrets.randbits(52)


def _timestamps() -> tuple[sa.Column[datetime.datetime], sa.Column[datetime.datetime]]:
    return (
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )


resource_classes = sa.Table(
    "resource_classes",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    *_timestamps(),
)

traits = sa.Table(
    "traits",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    *_timestamps(),
)

resource_providers = sa.Table(
    "resource_providers",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("name", sa.String(200), nullable=False, unique=True),
    sa.Column("generation", sa.Integer, nullable=False, default=0),
    # Berth's own, never shown: moves on with the generation and also when the generation stays, as
    # when allocations are freed or aggregates set before 1.19, so that a copy of the provider's
    # candidate data is current exactly while its revision is unchanged.  It starts at a random
    # value, so that a provider created with the id of a deleted one (SQLite may reuse ids) does
    # not take the deleted one's copies for its own.
    sa.Column("revision", sa.BigInteger, nullable=False, server_default="0", default=lambda: new_revision()),
    sa.Column("root_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"), nullable=True),
    sa.Column("parent_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"), nullable=True),
    *_timestamps(),
    sa.Index("ix_resource_providers_root_provider_id", "root_provider_id"),
    sa.Index("ix_resource_providers_parent_provider_id", "parent_provider_id"),
)

inventories = sa.Table(
    "inventories",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("resource_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"), nullable=False),
    sa.Column("resource_class_id", sa.Integer, sa.ForeignKey("resource_classes.id"), nullable=False),
    sa.Column("total", sa.BigInteger, nullable=False),
    sa.Column("reserved", sa.BigInteger, nullable=False),
    sa.Column("min_unit", sa.BigInteger, nullable=False),
    sa.Column("max_unit", sa.BigInteger, nullable=False),
    sa.Column("step_size", sa.BigInteger, nullable=False),
    sa.Column("allocation_ratio", sa.Float, nullable=False),
    # Sum of allocations against this inventory; see the module docstring.
    sa.Column("used", sa.BigInteger, nullable=False, default=0),
    *_timestamps(),
    sa.UniqueConstraint("resource_provider_id", "resource_class_id"),
    # Candidate search reads the providers of one class in provider order.
    sa.Index("ix_inventories_resource_class_id_resource_provider_id", "resource_class_id", "resource_provider_id"),
    # The providers of one class with room for an amount, as one range: what makes a request that
    # few providers can take cost what its answer does (berth.store.candidates.roots).
    sa.Index("ix_inventories_headroom", "resource_class_id", sa.text(f"({headroom_sql()})")),
    # The providers of one class whose max_unit admits an amount, as one range: an amount above
    # every max_unit, within the over-committed room, names no provider at once.
    sa.Index("ix_inventories_max_unit", "resource_class_id", "max_unit"),
)

projects = sa.Table(
    "projects",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("external_id", sa.String(255), nullable=False, unique=True),
    *_timestamps(),
)

users = sa.Table(
    "users",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("external_id", sa.String(255), nullable=False, unique=True),
    *_timestamps(),
)

consumer_types = sa.Table(
    "consumer_types",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    *_timestamps(),
)

consumers = sa.Table(
    "consumers",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("project_id", sa.Integer, sa.ForeignKey("projects.id"), nullable=False),
    sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), nullable=False),
    sa.Column("generation", sa.Integer, nullable=False, default=0),
    sa.Column("consumer_type_id", sa.Integer, sa.ForeignKey("consumer_types.id"), nullable=True),
    *_timestamps(),
    sa.Index("ix_consumers_project_id_user_id", "project_id", "user_id"),
)

allocations = sa.Table(
    "allocations",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("resource_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"), nullable=False),
    sa.Column("consumer_id", sa.String(36), nullable=False),
    sa.Column("resource_class_id", sa.Integer, sa.ForeignKey("resource_classes.id"), nullable=False),
    sa.Column("used", sa.BigInteger, nullable=False),
    *_timestamps(),
    sa.Index("ix_allocations_consumer_id", "consumer_id"),
    sa.Index("ix_allocations_resource_provider_id_resource_class_id", "resource_provider_id", "resource_class_id"),
)

placement_aggregates = sa.Table(
    "placement_aggregates",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    *_timestamps(),
)

resource_provider_aggregates = sa.Table(
    "resource_provider_aggregates",
    metadata,
    sa.Column("resource_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"), primary_key=True),
    sa.Column("aggregate_id", sa.Integer, sa.ForeignKey("placement_aggregates.id"), primary_key=True),
    *_timestamps(),
    sa.Index("ix_resource_provider_aggregates_aggregate_id", "aggregate_id"),
    # The members of a sharing provider's aggregates within a range of ids, one seek per aggregate:
    # the trees a request only pools can serve are read as the search needs them.
    sa.Index("ix_resource_provider_aggregates_aggregate_provider", "aggregate_id", "resource_provider_id"),
)

resource_provider_traits = sa.Table(
    "resource_provider_traits",
    metadata,
    sa.Column("resource_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id"), primary_key=True),
    sa.Column("trait_id", sa.Integer, sa.ForeignKey("traits.id"), primary_key=True),
    *_timestamps(),
    sa.Index("ix_resource_provider_traits_trait_id", "trait_id"),
)

# Berth's own, outside Placement's model: the server groups pick-and-claim places members of
# (berth.store.server_groups.membership).  A group's row is what concurrent picks for it lock, and it fixes the
# group's policy.  A member counts on the hosts where its consumer holds allocations now; the root
# it was placed on is kept as a record only, so neither table refers to providers or consumers, whose
# rows the Placement API deletes freely.
server_groups = sa.Table(
    "server_groups",
    metadata,
    sa.Column("uuid", sa.String(36), primary_key=True),
    sa.Column("policy", sa.String(32), nullable=False),
    *_timestamps(),
)

server_group_members = sa.Table(
    "server_group_members",
    metadata,
    sa.Column("group_uuid", sa.String(36), sa.ForeignKey("server_groups.uuid"), primary_key=True),
    sa.Column("consumer_uuid", sa.String(36), primary_key=True),
    sa.Column("root_provider_id", sa.Integer, nullable=False),
    sa.Column("created_at", sa.DateTime, nullable=False),
)

# Berth's own: one row per write transaction on PostgreSQL, inserted by the transaction itself just
# before its COMMIT, so that a commit whose connection was lost can be resolved (did it land?) on a
# new connection, on the same server or on the one that took over (berth.store.database).  ``fenced``
# rows are the resolver's: the transaction had not committed, and now never will.
commit_marks = sa.Table(
    "commit_marks",
    metadata,
    sa.Column("token", sa.String(32), primary_key=True),
    sa.Column("fenced", sa.Boolean, nullable=False),
    sa.Column("created_at", sa.DateTime, nullable=False),
    sa.Index("ix_commit_marks_created_at", "created_at"),
)

# Berth's own, outside Placement's model: a consumer whose allocations are released unless the lease
# is confirmed before it expires (berth.store.leases.ledger).  Keyed by the consumer's uuid, not its row: a
# lease may be taken before the consumer has any allocation, or even exists.
allocation_leases = sa.Table(
    "allocation_leases",
    metadata,
    sa.Column("consumer_uuid", sa.String(36), primary_key=True),
    sa.Column("expires_at", sa.DateTime, nullable=False),
    *_timestamps(),
    sa.Index("ix_allocation_leases_expires_at", "expires_at"),
)

# Berth's own: per-project quotas (berth.store.quotas). A project has a row in ``quota_projects``
# exactly while it has limits, project-wide or for one of its users: that row is what every claim
# checked against the project's limits locks, so that claims of one project are counted one after
# another. Projects and users are named by their external ids, as clients name them, not by the rows
# of ``projects`` and ``users``, which exist only once a consumer of theirs has allocations.
quota_projects = sa.Table(
    "quota_projects",
    metadata,
    sa.Column("project_id", sa.String(255), primary_key=True),
    *_timestamps(),
)

# One limit each: of the project as a whole (``user_id`` is '') or of one user within it, on a
# resource class (by name) or on the number of consumers holding allocations ('consumers').
quota_limits = sa.Table(
    "quota_limits",
    metadata,
    sa.Column("project_id", sa.String(255), sa.ForeignKey("quota_projects.project_id"), primary_key=True),
    sa.Column("user_id", sa.String(255), primary_key=True),
    sa.Column("resource", sa.String(255), primary_key=True),
    sa.Column("hard_limit", sa.BigInteger, nullable=False),
    *_timestamps(),
)

# Berth's own: what each project with limits holds, kept by triggers on ``allocations`` and
# ``consumers`` (migration 0012), so that a claim reads its project's usage instead of summing it. A
# project is counted while it has a row in ``quota_counted_projects`` (by the row id of ``projects``);
# ``quota_usage`` then holds, per resource class id, the sum of its consumers' allocations, for the
# project (``user_pk`` 0) and for each of its users, and under ``resource_class_id`` 0 how many of
# those consumers hold allocations (berth.store.quotas.usage).
quota_counted_projects = sa.Table(
    "quota_counted_projects",
    metadata,
    sa.Column("project_pk", sa.Integer, primary_key=True, autoincrement=False),
)

quota_usage = sa.Table(
    "quota_usage",
    metadata,
    sa.Column("project_pk", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("user_pk", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("resource_class_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("used", sa.BigInteger, nullable=False),
)

# Berth's own: the priority a pick gave its consumer (berth.store.pick.preemption). A consumer
# without a row has priority 0, so a pick of priority 0 writes none. Keyed by the consumer's uuid, as
# allocations name it; the row goes with the consumer's own row, which every path that empties a
# consumer's allocations deletes (berth.store.placement.allocations).
consumer_priorities = sa.Table(
    "consumer_priorities",
    metadata,
    sa.Column("consumer_uuid", sa.String(36), primary_key=True),
    sa.Column("priority", sa.Integer, nullable=False),
    sa.Column("created_at", sa.DateTime, nullable=False),
    sa.Index("ix_consumer_priorities_priority", "priority"),
)

# Berth's own: each consumer a preempting pick removed, whole, to make room for its own
# (berth.store.pick.preemption), so that the conductor can end its server and the agents drop its
# claims. A record, not a reference: the victim's rows are gone when this one is written.
preemptions = sa.Table(
    "preemptions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("consumer_uuid", sa.String(36), nullable=False),
    sa.Column("project_id", sa.String(255), nullable=False),
    sa.Column("priority", sa.Integer, nullable=False),
    sa.Column("root_provider_uuid", sa.String(36), nullable=False),
    sa.Column("preempted_by", sa.String(36), nullable=False),
    sa.Column("preempted_at", sa.DateTime, nullable=False),
    sa.Index("ix_preemptions_consumer_uuid", "consumer_uuid"),
    sa.Index("ix_preemptions_preempted_by", "preempted_by"),
    sa.Index("ix_preemptions_preempted_at", "preempted_at"),
)
