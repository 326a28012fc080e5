"""Berth's own Placement client reads the 401 Placement answers as WebOb's own error (no ``errors``
list): its detail is the stock sentence, not the raw JSON body, which the CLI printed before its
hint. A real ``berth serve``."""

from __future__ import annotations

import pytest
from livehelpers import LiveServer

from berth.clients.errors import PlacementError
from berth.clients.placement import PlacementClient

pytestmark = pytest.mark.slow


def test_a_refused_token_is_said_in_the_stock_sentence(tmp_path):
    live = LiveServer(f"sqlite:///{tmp_path}/books.db", workers=1)
    try:
        client = PlacementClient(live.url, "")
        with pytest.raises(PlacementError) as caught:
            client.get("/resource_providers")
    finally:
        live.stop()
    assert caught.value.status == 401
    assert caught.value.detail.startswith("This server could not verify that you are authorized")
    assert "{" not in caught.value.detail and "<br" not in caught.value.detail
