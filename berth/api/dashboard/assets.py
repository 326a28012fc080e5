"""The page's files, shipped inside the package and read once."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}
PAGE = "index.html"
# Where the page says the service's root is; every URL in the page and its scripts is relative to it,
# so that the dashboard works under whatever path the service is mounted at.
ROOT_MARKER = "__BERTH_ROOT__"


@dataclass(frozen=True)
class Asset:
    body: bytes
    content_type: str


@cache
def assets() -> dict[str, Asset]:
    """Every file of ``static/`` by name."""
    folder = resources.files(__package__ or __name__).joinpath("static")
    found: dict[str, Asset] = {}
    for entry in folder.iterdir():
        suffix = entry.name[entry.name.rfind(".") :]
        if entry.is_file() and suffix in _TYPES:
            found[entry.name] = Asset(entry.read_bytes(), _TYPES[suffix])
    return found


def page(root: str) -> bytes:
    """The dashboard's HTML with the service's root path (``""`` when mounted at ``/``) filled in."""
    return assets()[PAGE].body.replace(ROOT_MARKER.encode(), root.encode())
