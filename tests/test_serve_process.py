"""``berth serve`` as a real process: what it does when it cannot have the address it was given."""

from __future__ import annotations

import pytest
from livehelpers import LiveServer, run_berth

pytestmark = pytest.mark.slow


def test_a_second_server_on_a_taken_port_refuses_to_start(tmp_path):
    first = LiveServer(f"sqlite:///{tmp_path / 'first.sqlite'}", workers=1)
    try:
        done = run_berth(
            "serve", "--bind", f"127.0.0.1:{first.server.port}", "--database", f"sqlite:///{tmp_path / 'second.sqlite'}"
        )
        assert done.returncode != 0
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert f"127.0.0.1:{first.server.port}" in lines[0]
        assert "already in use" in lines[0]
        # Refused before it touched its database.
        assert not (tmp_path / "second.sqlite").exists()
        assert first.server.running()
    finally:
        first.stop()
