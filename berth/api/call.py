"""What a handler is given: the request it serves and the service's parts it may use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from berth.api.microversion import Version
from berth.api.request import PlacementRequest, QueryArgs
from berth.api.settings import Settings
from berth.api.validation import JsonSchema, parse_json_body
from berth.store.candidates.provider_cache import ProviderCache
from berth.store.database import Database
from berth.store.pick.board.host_board import HostBoard
from berth.web.access.auth import Caller
from berth.web.access.policy import PolicyEnforcer


@dataclass
class Call:
    """Everything a handler needs to know about the request it serves."""

    request: PlacementRequest
    version: Version
    request_id: str
    caller: Caller | None
    db: Database
    policy: PolicyEnforcer
    settings: Settings
    provider_cache: ProviderCache
    host_board: HostBoard

    @property
    def args(self) -> QueryArgs:
        # Werkzeug types ``args`` as its base class; ``PlacementRequest`` makes every one a ``QueryArgs``.
        return cast(QueryArgs, self.request.args)

    def authorize(self, rule: str, target: dict[str, str | None] | None = None) -> None:
        self.policy.authorize(self.caller, rule, target)

    def json_body(self, schema: JsonSchema | None = None) -> Any:
        """The request's JSON body (any JSON document), checked against ``schema`` if given."""
        return parse_json_body(self.request, schema)
