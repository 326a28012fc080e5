"""GET /: version discovery."""

from __future__ import annotations

from berth.api import microversion
from berth.api.responses import json_response


def versions(call):
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
