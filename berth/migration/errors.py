"""Why a move or a comparison stops."""

from __future__ import annotations


class MigrationError(Exception):
    """A move that cannot go on; the message says why and what to do."""


class TooOld(MigrationError):
    """The endpoint speaks no microversion recent enough to show consumer generations (1.28)."""


class SourceChanged(MigrationError):
    """What was read does not add up, because something wrote to the source while it was read."""


class NotEmpty(MigrationError):
    """The target database already holds books of its own."""
