"""GET /: version discovery."""

from __future__ import annotations

from berth.api import microversion
from berth.api.call import Call
from berth.api.responses import json_response
from berth.web.responses import Reply


def versions(call: Call) -> Reply:
    return json_response(
        call,
        {
            "versions": [
                {
                    "id": "v1.0",
                    "max_version": str(microversion.MAX),
                    "min_version": str(microversion.MIN),
                    "status": "CURRENT",
                    "links": [{"rel": "self", "href": ""}],
                }
            ]
        },
    )
