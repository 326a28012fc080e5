"""The SQL plumbing the service's store and the conductors' journal share: statements sent straight
to the driver inside a SQLAlchemy transaction (``driver``)."""
