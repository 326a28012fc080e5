"""``berth serve``: its settings, declared once, and the command that starts the server with them."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import click

from berth.api.settings import METRICS_MODES, Settings
from berth.cli.harness import DEFAULT_WORKERS
from berth.cli.services.exposure import (
    AUTH_STRATEGIES,
    bind_host,
    check_bind,
    check_keystone_config,
    check_tokens_file,
    is_loopback,
    policy_file_path,
)
from berth.cli.settings import (
    SettingsError,
    click_options,
    command_line_layer,
    read_settings_file,
    resolve,
    setting,
)
from berth.store.database import DEFAULT_SQLITE_FILE
from berth.store.leases.reaper import DEFAULT_INTERVAL_S
from berth.web.observability.request_log import LOG_FORMATS


@dataclass(frozen=True)
class ServeSettings:
    """Every setting of ``berth serve``; the order is the order of ``--help`` and of the README's table."""

    bind: str = setting(
        "127.0.0.1:8778", help="address:port to listen on", env="BERTH_BIND", metavar="HOST:PORT", check=check_bind
    )
    database: str = setting(
        f"sqlite:///{DEFAULT_SQLITE_FILE}",
        help="SQLAlchemy database URL",
        env="BERTH_DATABASE_URL",
        default_text=f"a SQLite file {DEFAULT_SQLITE_FILE} in the current folder",
        metavar="URL",
    )
    workers: int = setting(
        DEFAULT_WORKERS,
        help="worker processes",
        env="BERTH_WORKERS",
        minimum=1,
        default_text="one per core, at most 4",
        metavar="N",
    )
    threads: int = setting(1, help="threads per worker", env="BERTH_THREADS", minimum=1, metavar="N")
    access_log: bool = setting(False, help="log every request", env="BERTH_ACCESS_LOG")
    auth_strategy: str = setting(
        Settings.auth_strategy, help="how callers are identified", env="BERTH_AUTH_STRATEGY", choices=AUTH_STRATEGIES
    )
    tokens_file: str | None = setting(
        None,
        help="YAML file of tokens and their users, projects and roles, for --auth-strategy tokens",
        env="BERTH_TOKENS_FILE",
        metavar="FILE",
    )
    policy_file: str | None = setting(
        None,
        help="oslo.policy rules (YAML or JSON) overriding the defaults by Placement's rule names",
        env="BERTH_POLICY_FILE",
        metavar="FILE",
    )
    enforce_new_defaults: bool = setting(
        Settings.enforce_new_defaults,
        help="the secure RBAC defaults, as Placement's (reshaping needs the service role); "
        "--no-enforce-new-defaults for the legacy ones, under which the admin role may do everything",
        env="BERTH_ENFORCE_NEW_DEFAULTS",
    )
    cors_allowed_origin: tuple[str, ...] = setting(
        (),
        help="origin allowed to make cross-site requests; repeatable, or comma-separated",
        env="BERTH_CORS_ALLOWED_ORIGIN",
        repeatable=True,
        metavar="URL",
    )
    cors_allow_headers: tuple[str, ...] = setting(
        (),
        help="extra request headers allowed in cross-site requests, comma-separated",
        env="BERTH_CORS_ALLOW_HEADERS",
        metavar="NAMES",
    )
    max_candidates: int = setting(
        Settings.max_candidates,
        help="most allocation candidates generated for one request, whatever its limit",
        env="BERTH_MAX_CANDIDATES",
        # A bound of zero would answer every allocation candidates request with nothing.
        minimum=1,
        metavar="N",
    )
    randomize_candidates: bool = setting(
        False,
        help="return allocation candidates in random order instead of provider order",
        env="BERTH_RANDOMIZE_CANDIDATES",
    )
    provider_cache_size: int = setting(
        Settings.provider_cache_size,
        help="providers whose candidate data each worker keeps between requests, each checked against "
        "the database before use; 0 for none",
        env="BERTH_PROVIDER_CACHE_SIZE",
        minimum=0,
        metavar="N",
    )
    lease_check_interval: float = setting(
        DEFAULT_INTERVAL_S,
        help="seconds between each worker's passes releasing the allocations of expired claim leases; 0 for none",
        env="BERTH_LEASE_CHECK_INTERVAL",
        minimum=0,
        default_text=f"{DEFAULT_INTERVAL_S:g}",
        metavar="SECONDS",
    )
    metrics: str = setting(
        Settings.metrics,
        help="GET /metrics: off, open (no token: for a scraper on a private network) or guarded "
        "(authenticated, under the policy rule berth:metrics)",
        env="BERTH_METRICS",
        choices=METRICS_MODES,
    )
    dashboard_conductor: str | None = setting(
        None,
        help="the conductors' API whose control plane the dashboard shows (its operations, failures and "
        "hosts), read by the page with its token; the conductors must allow this service's origin "
        "(berth conductor --cors-allowed-origin)",
        env="BERTH_DASHBOARD_CONDUCTOR",
        metavar="URL",
    )
    enforce_quotas_on_allocations: bool = setting(
        Settings.enforce_quotas_on_allocations,
        help="check the projects' quotas (berth quota) on PUT and POST /allocations too, not only on "
        "POST /berth/pick; off, those writes are Placement's, which has no quotas",
        env="BERTH_ENFORCE_QUOTAS_ON_ALLOCATIONS",
    )
    pick_board: bool = setting(
        Settings.pick_board,
        help="weigh each pick on its worker's board of every tree, read again several times a second "
        "(fast at any size; a tree freed a moment ago may still rank as full); off, every pick searches "
        "the database as it stands (exact; slower in clouds of thousands of hosts)",
        env="BERTH_PICK_BOARD",
    )
    log_format: str = setting(
        "text",
        help="the log's lines, one per request included: key=value text or JSON objects",
        env="BERTH_LOG_FORMAT",
        choices=LOG_FORMATS,
    )
    force_insecure: bool = setting(
        False, help="allow the noauth2 development mode on a non-loopback address", env="BERTH_FORCE_INSECURE"
    )

    def api_settings(self) -> Settings:
        return Settings(
            max_candidates=self.max_candidates,
            randomize_candidates=self.randomize_candidates,
            auth_strategy=self.auth_strategy,
            tokens_file=self.tokens_file,
            policy_file=self.policy_file,
            enforce_new_defaults=self.enforce_new_defaults,
            provider_cache_size=self.provider_cache_size,
            cors_allowed_origins=self.cors_allowed_origin,
            cors_allow_headers=self.cors_allow_headers,
            metrics=self.metrics,
            dashboard_conductor=self.dashboard_conductor,
            enforce_quotas_on_allocations=self.enforce_quotas_on_allocations,
            pick_board=self.pick_board,
        )


def load_serve_settings(params: Mapping[str, Any], environ: Mapping[str, str]) -> ServeSettings:
    """The settings, with the tokens and policy files read (SettingsError for a bad one) and the
    policy file's path made absolute."""
    config_path: str | None = params.get("config")
    settings = resolve(
        ServeSettings,
        command_line=command_line_layer(params, ServeSettings),
        file=read_settings_file(config_path, ServeSettings) if config_path else None,
        file_name=config_path or "",
        environ=environ,
    )
    check_tokens_file(settings.auth_strategy, settings.tokens_file)
    check_keystone_config(settings.auth_strategy, environ)
    return dataclasses.replace(settings, policy_file=policy_file_path(settings.policy_file))


@click.command("serve", help="Run the Placement-compatible API.")
@click.option(
    "--config",
    default=None,
    metavar="FILE",
    help="YAML file of settings named like the long options (auth_strategy, policy_file, "
    "cors_allowed_origin, ...); the command line wins over it, it wins over the environment",
)
@click_options(ServeSettings)
@click.pass_context
def serve_command(ctx: click.Context, /, **params: Any) -> int:
    status = run(ctx, params)
    if status:
        raise click.exceptions.Exit(status)
    return status


def run(ctx: click.Context, params: Mapping[str, Any]) -> int:
    from berth.api import server
    from berth.web.server import AddressInUse

    try:
        settings = load_serve_settings(params, os.environ)
    except SettingsError as error:
        # A malformed setting is a usage error wherever it was given: the message, then exit status 2.
        click.UsageError(str(error), ctx).show()
        raise SystemExit(2) from None
    host = bind_host(settings.bind)
    if settings.auth_strategy == "noauth2" and not is_loopback(host) and not settings.force_insecure:
        print(
            f"refusing to serve the noauth2 development mode on {host}: anyone who can reach it could "
            "act as admin. Bind to a loopback address, choose --auth-strategy tokens or keystone, "
            "or pass --force-insecure.",
            file=sys.stderr,
        )
        return 2
    try:
        return server.serve(
            bind=settings.bind,
            database_url=settings.database,
            workers=settings.workers,
            threads=settings.threads,
            access_log=settings.access_log,
            settings=settings.api_settings(),
            lease_check_interval=settings.lease_check_interval,
            log_format=settings.log_format,
        )
    except AddressInUse:
        # "Address already in use" is the kernel's own wording, which the test bed's retry looks for.
        print(
            f"berth serve: cannot listen on {settings.bind}: Address already in use by another process; "
            "stop it or choose another --bind.",
            file=sys.stderr,
        )
        return 1
