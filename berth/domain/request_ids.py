"""What a caller may pass as its global request id (``X-Openstack-Request-Id``), as OpenStack's
services accept it: ``req-`` and a UUID. The service, the conductors and the agents each take a
well-formed one as the id to log and to carry into the calls they make for the request."""

from __future__ import annotations

import re
from typing import Final

GLOBAL_REQUEST_ID: Final = re.compile(r"req-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")


def global_request_id(header: str | None) -> str | None:
    """The caller's ``x-openstack-request-id`` when it is a well-formed one; anything else is dropped."""
    if header and GLOBAL_REQUEST_ID.match(header):
        return header
    return None
