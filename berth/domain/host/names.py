"""What a host may be named: the name is its compute node provider's, the claim store's file name
(``<state_dir>/<host>.sqlite``) and a segment of the conductors' URLs (``PUT /hosts/{name}``), so it
is refused at start unless all three can take it as it is.

The rule: letters, digits, ``-``, ``_`` and ``.``, the first a letter or a digit (no ``..`` to walk
out of a folder or a URL), 1 to 180 characters: the conductors take 255, but Placement names a
provider in at most 200 and the host's children are ``<host>_NUMA0``, ``<host>_0000:81:00.0``, ...
(and a file name is at most 255 bytes, ``<host>.sqlite.guests.json.tmp`` among them). Nova's host
names (RFC 1123 names and most FQDNs) keep it; ``/``, a space, ``%`` or ``?`` never get this far.
"""

from __future__ import annotations

import re
from typing import Final

MAX_LENGTH: Final = 180
PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
RULE: Final = f"a host name is 1 to {MAX_LENGTH} letters, digits, '-', '_' and '.', the first a letter or a digit"


def host_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a host (the rule, with what breaks it); None when it can."""
    if not name:
        return f"an empty name: {RULE}"
    if len(name) > MAX_LENGTH:
        return f"{len(name)} characters: {RULE}"
    if not PATTERN.fullmatch(name):
        wrong = sorted({c for c in name if not (c.isascii() and (c.isalnum() or c in "._-"))})
        if wrong:
            return f"{', '.join(repr(c) for c in wrong)} not allowed: {RULE}"
        return f"it starts with {name[0]!r}: {RULE}"
    return None
