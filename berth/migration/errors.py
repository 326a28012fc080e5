"""Why a move or a comparison stops."""

from __future__ import annotations

from berth.clients.errors import PlacementError


class MigrationError(Exception):
    """A move that cannot go on; the message says why and what to do."""


class TooOld(MigrationError):
    """The endpoint speaks no microversion recent enough to show consumer generations (1.28)."""


class SourceChanged(MigrationError):
    """What was read does not add up, because something wrote to the source while it was read."""


class NotPlacement(MigrationError):
    """An endpoint that answered, but not as Placement does: another service's URL (a dashboard, a
    web page, Keystone, Nova), or a proxy in front of Placement that answered in its place."""


class NotEmpty(MigrationError):
    """The target database already holds books of its own."""


class Unreadable(MigrationError):
    """An endpoint that could not be read: it did not answer, or refused (a token without the admin
    role, a URL that is not Placement's endpoint). ``url`` is the endpoint, ``error`` its answer, and
    ``side`` in a comparison which of the two it is ("first" or "second"; the URLs may be the same)."""

    def __init__(self, url: str, error: PlacementError, side: str | None = None):
        super().__init__(f"cannot read the books of {url}: {error}")
        self.url = url
        self.error = error
        self.side = side
