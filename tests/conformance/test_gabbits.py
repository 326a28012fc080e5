"""OpenStack Placement's own functional tests (its gabbi YAML files) run against a live ``berth serve``.

The files come with the ``openstack-placement`` package of the test extra
(``placement/tests/functional/gabbits``); the fixtures they name are rebuilt over Berth's API in
``placementfixtures.py``.  Each file is one test here: it runs on an empty database, its requests in
order, and passes when every request answers as the file expects, except exactly those listed in
:data:`EXPECTED_FAILURES`, which must fail.  A listed request that passes fails the file too, so that
the table stays exact.  docs/compatibility.md says how to run it and what it found.

The server's settings follow the fixture a file names, as Placement's fixtures set its configuration:
its plain fixtures enforce the legacy policy defaults, ``SecureRBACPolicyFixture`` the new ones,
``OpenPolicyFixture`` allows every rule to anyone and ``CORSFixture`` turns CORS on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import unittest
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import placementfixtures
import pytest
import yaml
from dbhelpers import make_database, reset
from gabbi import handlers, suitemaker, utils
from placement import policies
from placement.tests import functional as placement_functional

from berth.store.database import Database
from berth.testbed.services.server import Server

pytestmark = pytest.mark.slow

GABBITS = Path(placement_functional.__file__).parent / "gabbits"
FILES = sorted(path.name for path in GABBITS.glob("*.yaml"))
# The files of the policy fixtures (their requests check who may call, not what the database answers).
POLICY_FILES = {name for name in FILES if name.endswith(("-policy.yaml", "-rbac.yaml"))}
# Files run on PostgreSQL too: those of the candidate search and of reshaping, whose queries differ by
# database (the policy ones but once, on SQLite).
POSTGRESQL_FILES = sorted(
    name
    for name in FILES
    if name.startswith(("allocation-candidates", "granular", "same-subtree", "reshaper")) and name not in POLICY_FILES
)
RUNS = [pytest.param(name, "sqlite", id=name) for name in FILES]
RUNS += [pytest.param(name, "postgresql", id=f"{name}-postgresql") for name in POSTGRESQL_FILES]

LEGACY = ["--no-enforce-new-defaults"]
# The server options of each fixture (a file names one).
SERVER_SETTINGS: dict[str, list[str]] = {
    "APIFixture": LEGACY,
    "LegacyRBACPolicyFixture": LEGACY,
    "SecureRBACPolicyFixture": ["--enforce-new-defaults"],
    "OpenPolicyFixture": [*LEGACY, "--policy-file", "{open_policy}"],
    "CORSFixture": [
        *LEGACY,
        "--cors-allowed-origin",
        "http://valid.example.com",
        "--cors-allow-headers",
        "openstack-api-version",
    ],
}

# (file, test name): why the request answers otherwise on Berth.  A reason starting with "defect:" is
# a difference Berth should not have; the others are differences on purpose (docs/compatibility.md)
# or of the set-up, not of Berth's answers.
EXPECTED_FAILURES: dict[tuple[str, str], str] = {
    ("basic-http.yaml", "bad content length not int"): (
        "set-up: the HTTP client refuses to send a Content-Length that is not a number over a real "
        "connection (Placement's run hands the request straight to its WSGI application); sent over a "
        "socket, Berth's HTTP server refuses it before the application, with a 400 and an empty body"
    ),
}


class _ConfiguredServer(Server):
    """``berth serve`` with one worker and extra options."""

    def __init__(self, database_url: str, logdir: str, options: list[str]):
        super().__init__(database_url, 1, logdir)
        self.options = options

    def _spawn(self) -> subprocess.Popen[bytes]:
        command = [sys.executable, "-m", "berth.cli.main", "serve", "--bind", f"127.0.0.1:{self.port}"]
        command += ["--database", self.database_url, "--workers", "1", *self.options]
        with open(self.logpath, "ab") as logfile:
            return subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=logfile, stderr=subprocess.STDOUT, start_new_session=True
            )


class _Servers:
    """One server per database kind and settings, each on its own database, started when first needed."""

    def __init__(self, folder: Path, new_database: Callable[[str], str]):
        self.folder = folder
        self.new_database = new_database
        self.started: dict[tuple[str, ...], tuple[_ConfiguredServer, Database]] = {}
        open_policy = folder / "open-policy.yaml"
        # As Placement's OpenPolicyFixture: every rule but the base admin rule allows anyone.
        open_policy.write_text(yaml.safe_dump({r.name: "@" for r in policies.list_rules() if r.name != "admin_api"}))
        self.values = {"open_policy": str(open_policy)}

    def target(self, backend: str, fixture_name: str) -> tuple[placementfixtures.Target, _ConfiguredServer]:
        options = tuple(option.format(**self.values) for option in SERVER_SETTINGS.get(fixture_name, LEGACY))
        key = (backend, *options)
        if key not in self.started:
            url = self.new_database(backend)
            server = _ConfiguredServer(url, tempfile.mkdtemp(prefix="berth-gabbi-", dir=self.folder), list(options))
            server.start()
            self.started[key] = (server, Database(url))
        server, db = self.started[key]
        return placementfixtures.Target(server.url, lambda: reset(db)), server

    def stop(self) -> list[str]:
        """Stop every server; the logs of those that logged a traceback."""
        logs = []
        for server, db in self.started.values():
            db.dispose()
            server.stop(grace=5.0)
            logs.append(server.log_text())
        return [log for log in logs if "Traceback" in log]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[_Servers]:
    started = _Servers(
        tmp_path_factory.mktemp("gabbi"), lambda backend: make_database(backend, tmp_path_factory, request)
    )
    yield started
    crashed = started.stop()
    assert not crashed, "\n\n".join(crashed)


class _Outcomes(unittest.TestResult):
    """Each request's name and outcome, in the order they ran (names may repeat within a file)."""

    def __init__(self) -> None:
        super().__init__()
        self.outcomes: list[tuple[str, str, str]] = []

    def _record(self, test: Any, outcome: str, detail: str = "") -> None:
        self.outcomes.append((getattr(test, "test_data", {}).get("name", str(test)), outcome, detail))

    def addSuccess(self, test: Any) -> None:  # noqa: N802 - unittest's names
        self._record(test, "passed")

    def addFailure(self, test: Any, err: Any) -> None:  # noqa: N802
        self._record(test, "failed", self._exc_info_to_string(err, test))

    def addError(self, test: Any, err: Any) -> None:  # noqa: N802
        self._record(test, "failed", self._exc_info_to_string(err, test))

    def addSkip(self, test: Any, reason: str) -> None:  # noqa: N802
        self._record(test, "skipped", reason)

    def addExpectedFailure(self, test: Any, err: Any) -> None:  # noqa: N802
        self._record(test, "failed", "marked xfail in the file")

    def addUnexpectedSuccess(self, test: Any) -> None:  # noqa: N802
        self._record(test, "failed", "marked xfail in the file, but passed")


def run_file(filename: str, target: placementfixtures.Target) -> list[tuple[str, str, str]]:
    """Each request of one gabbi file, run in order against ``target``: name, outcome, detail."""
    suite_dict = utils.load_yaml(yaml_file=str(GABBITS / filename), safe=True)
    # Plain HTTP: without this each request's client would load the system's CA certificates.
    suite_dict.setdefault("defaults", {})["cert_validate"] = False
    host, port = target.url.removeprefix("http://").rsplit(":", 1)
    suite = suitemaker.test_suite_from_dict(
        unittest.TestLoader(),
        filename.removesuffix(".yaml"),
        suite_dict,
        str(GABBITS),
        host,
        int(port),
        placementfixtures,
        None,
        handlers=[handler() for handler in handlers.RESPONSE_HANDLERS],
        test_loader_name="berth_conformance",
    )
    saved_environ = dict(os.environ)
    placementfixtures.TARGET = target
    outcomes = _Outcomes()
    try:
        suite.run(outcomes)
    finally:
        placementfixtures.TARGET = None
        os.environ.clear()
        os.environ.update(saved_environ)
    return outcomes.outcomes


def _fixture_of(filename: str) -> str:
    with open(GABBITS / filename) as f:
        fixtures = yaml.safe_load(f).get("fixtures") or ["APIFixture"]
    return str(fixtures[0]).removeprefix("- ")


def judge(filename: str, outcomes: list[tuple[str, str, str]]) -> tuple[dict[str, int], list[str]]:
    """The file's counts, and what differs from :data:`EXPECTED_FAILURES`."""
    counts = {"passed": 0, "expected failures": 0, "failed": 0}
    problems = []
    for name, outcome, detail in outcomes:
        expected = EXPECTED_FAILURES.get((filename, name))
        if outcome == "passed" and expected is None:
            counts["passed"] += 1
        elif outcome == "failed" and expected is not None:
            counts["expected failures"] += 1
        elif outcome == "passed":
            counts["failed"] += 1
            problems.append(f"{name!r} passes but is listed as an expected failure ({expected})")
        else:
            counts["failed"] += 1
            problems.append(f"{name!r} {outcome}:\n{detail}")
    names = {name for name, _, _ in outcomes}
    problems += [
        f"{name!r} is listed as an expected failure but the file has no such test"
        for (file, name) in EXPECTED_FAILURES
        if file == filename and name not in names
    ]
    return counts, problems


@pytest.mark.parametrize(("filename", "backend"), RUNS)
def test_placement_gabbi_file(filename: str, backend: str, servers: _Servers, record_property: Any) -> None:
    target, server = servers.target(backend, _fixture_of(filename))
    counts, problems = judge(filename, run_file(filename, target))
    record_property("counts", counts)
    print(f"{filename}: {counts}")
    assert not problems, f"{filename} {counts}:\n" + "\n\n".join(problems) + f"\n\nserver log:\n{server.log_tail()}"
