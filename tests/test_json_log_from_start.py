"""``--log-format json``: every line ``berth serve`` and ``berth conductor`` write to standard error,
from their start (the schema's upgrade on a fresh database, Alembic's lines, some of several lines)
to their stop, is one JSON object."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import orjson
import pytest
import requests
from livehelpers import free_port


def run_until_answered(arguments: list[str], url: str, stderr_path) -> None:
    """``berth ARGUMENTS`` until ``url`` answers 200 (asked once more after), then SIGINT and its end."""
    environment = {name: value for name, value in os.environ.items() if not name.startswith("BERTH_")}
    with open(stderr_path, "wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "berth.cli.main", *arguments],
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, stderr_path.read_text()
            try:
                if requests.get(url, timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, stderr_path.read_text()
            time.sleep(0.1)
        assert requests.get(url, timeout=5).status_code == 200
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0, stderr_path.read_text()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.parametrize("command", ["serve", "conductor"])
def test_every_line_from_start_to_stop_is_one_json_object(tmp_path, command):
    port = free_port()
    database = f"sqlite:///{tmp_path / 'fresh.sqlite'}"
    arguments = [command, "--bind", f"127.0.0.1:{port}", "--workers", "1", "--database", database]
    arguments += ["--log-format", "json", "--access-log"]
    if command == "conductor":
        arguments += ["--placement", f"http://127.0.0.1:{free_port()}"]  # not called by /healthz
    stderr = tmp_path / "stderr"
    run_until_answered(arguments, f"http://127.0.0.1:{port}/healthz", stderr)

    lines = stderr.read_text().splitlines()
    documents = []
    for line in lines:
        try:
            documents.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            pytest.fail(f"not a JSON object: {line!r}\nin:\n{stderr.read_text()}")
    assert all(isinstance(d, dict) and d["level"] and d["logger"] for d in documents), documents
    loggers = {d["logger"] for d in documents}
    # The fresh database's upgrade, written before the server starts, and the server's own lines.
    assert "alembic.runtime.migration" in loggers, loggers
    assert any(name.startswith("_granian") for name in loggers), loggers
    assert any(d.get("route") == "/healthz" for d in documents if d["logger"] == "berth.request"), documents
    if command == "serve":
        # Some revisions' messages span several lines: one object each, the newlines inside it.
        assert any("\n" in d.get("message", "") for d in documents), documents
