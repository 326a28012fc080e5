"""``berth conductor``: the conductors' API and the operations it starts, as a service.

    berth conductor --placement http://127.0.0.1:8778 --database postgresql+psycopg://... --workers 2

Every worker process is a conductor of its own (its own owner in the journal, its own heartbeat);
several ``berth conductor`` processes, on one machine or several, share one database (PostgreSQL;
a SQLite file for the conductors of one machine) and any of them takes any request.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from berth.cli.services.exposure import (
    AUTH_STRATEGIES,
    bind_host,
    check_bind,
    check_keystone_config,
    check_tokens_file,
    is_loopback,
    policy_file_path,
)
from berth.cli.settings import SettingsError, click_options, command_line_layer, read_settings_file, resolve, setting
from berth.clients.placement import SERVICE_ROLES
from berth.web.observability.request_log import LOG_FORMATS

if TYPE_CHECKING:
    from berth.conductor.control.plane import ControlPlane
    from berth.scheduler.request.flavor import PciAlias

DEFAULT_DATABASE = "sqlite:///conductor.sqlite"
METRICS_MODES = ("off", "open", "guarded")


@dataclass(frozen=True)
class ConductorSettings:
    bind: str = setting(
        "127.0.0.1:8774",
        help="address:port to listen on",
        env="BERTH_CONDUCTOR_BIND",
        metavar="HOST:PORT",
        check=check_bind,
    )
    placement: str = setting(
        "http://127.0.0.1:8778", help="the Placement service", env="BERTH_PLACEMENT_URL", metavar="URL"
    )
    placement_token: str = setting(
        "admin", help="X-Auth-Token for Placement", env="BERTH_PLACEMENT_TOKEN", metavar="TOKEN"
    )
    placement_roles: tuple[str, ...] = setting(
        SERVICE_ROLES,
        help="roles to say in X-Roles to Placement, as a service user's (noauth2 only)",
        env="BERTH_PLACEMENT_ROLES",
        default_text=",".join(SERVICE_ROLES),
        metavar="ROLE,...",
    )
    database: str = setting(
        DEFAULT_DATABASE,
        help="SQLAlchemy URL of the conductors' database (the journal, servers, flavors, groups, hosts)",
        env="BERTH_CONDUCTOR_DATABASE_URL",
        default_text="a SQLite file conductor.sqlite in the current folder",
        metavar="URL",
    )
    workers: int = setting(
        min(2, os.cpu_count() or 1),
        help="worker processes, each a conductor",
        env="BERTH_CONDUCTOR_WORKERS",
        minimum=1,
        default_text="2, or 1 on one core",
    )
    threads: int = setting(8, help="request threads per worker", env="BERTH_CONDUCTOR_THREADS", minimum=1)
    operation_threads: int = setting(
        32, help="operations one worker runs at once", env="BERTH_CONDUCTOR_OPERATION_THREADS", minimum=1
    )
    host_down_after: float = setting(
        60.0,
        help="seconds without a heartbeat after which a host is down",
        minimum=1,
        metavar="SECONDS",
        env="BERTH_CONDUCTOR_HOST_DOWN_AFTER",
    )
    heartbeat_interval: float = setting(
        10.0,
        help="seconds between a conductor's heartbeats in the journal",
        minimum=0.1,
        metavar="SECONDS",
        env="BERTH_CONDUCTOR_HEARTBEAT_INTERVAL",
    )
    dead_after: float = setting(
        60.0,
        help="seconds of a conductor's silence after which another takes its operations over",
        minimum=1,
        metavar="SECONDS",
        env="BERTH_CONDUCTOR_DEAD_AFTER",
    )
    max_attempts: int = setting(
        3, help="hosts tried per build or move", minimum=1, metavar="N", env="BERTH_CONDUCTOR_MAX_ATTEMPTS"
    )
    pci_aliases: str | None = setting(
        None,
        help='the PCI aliases flavors may name, a JSON list of Nova\'s [pci] alias entries: [{"name": "gpu", '
        '"vendor_id": "10de", "product_id": "1eb8"}]',
        metavar="JSON",
        env="BERTH_CONDUCTOR_PCI_ALIASES",
    )
    max_placement_results: int = setting(
        1000,
        help="the candidates asked of Placement per request",
        minimum=1,
        metavar="N",
        env="BERTH_CONDUCTOR_MAX_PLACEMENT_RESULTS",
    )
    host_subset_size: int = setting(
        1,
        help="the host chosen is drawn at random among this many best",
        minimum=1,
        metavar="N",
        env="BERTH_CONDUCTOR_HOST_SUBSET_SIZE",
    )
    auth_strategy: str = setting(
        "noauth2", help="how callers are identified", env="BERTH_AUTH_STRATEGY", choices=AUTH_STRATEGIES
    )
    tokens_file: str | None = setting(
        None, help="YAML file of tokens, for --auth-strategy tokens", env="BERTH_TOKENS_FILE", metavar="FILE"
    )
    policy_file: str | None = setting(
        None,
        help="oslo.policy rules overriding the defaults (berth:servers:create ...)",
        metavar="FILE",
        env="BERTH_POLICY_FILE",
    )
    enforce_new_defaults: bool = setting(
        True, help="the secure RBAC defaults; --no-... for the legacy ones", env="BERTH_ENFORCE_NEW_DEFAULTS"
    )
    metrics: str = setting(
        "guarded",
        help="GET /metrics: off, open or guarded (rule berth:metrics)",
        choices=METRICS_MODES,
        env="BERTH_METRICS",
    )
    access_log: bool = setting(False, help="log every request", env="BERTH_ACCESS_LOG")
    log_format: str = setting(
        "text", help="the log's lines: key=value text or JSON", choices=LOG_FORMATS, env="BERTH_LOG_FORMAT"
    )
    force_insecure: bool = setting(
        False, help="allow the noauth2 development mode on a non-loopback address", env="BERTH_FORCE_INSECURE"
    )
    cors_allowed_origin: tuple[str, ...] = setting(
        (),
        help="origin whose pages may call the API (the service's dashboard); repeatable, or comma-separated",
        env="BERTH_CORS_ALLOWED_ORIGIN",
        repeatable=True,
        metavar="URL",
    )


def load_settings(params: Mapping[str, Any], environ: Mapping[str, str]) -> ConductorSettings:
    """The settings, with the tokens and policy files read (SettingsError for a bad one) and the
    policy file's path made absolute."""
    config_path: str | None = params.get("config")
    settings = resolve(
        ConductorSettings,
        command_line=command_line_layer(params, ConductorSettings),
        file=read_settings_file(config_path, ConductorSettings) if config_path else None,
        file_name=config_path or "",
        environ=environ,
    )
    check_tokens_file(settings.auth_strategy, settings.tokens_file)
    check_keystone_config(settings.auth_strategy, environ)
    return dataclasses.replace(settings, policy_file=policy_file_path(settings.policy_file))


def control_plane(settings: ConductorSettings) -> ControlPlane:
    """One conductor: the control plane a worker serves."""
    from berth.clients.placement import PlacementClient
    from berth.conductor.control.plane import ControlPlane, ControlSettings
    from berth.conductor.runner import ConductorConfig
    from berth.scheduler.request.flavor import SchedulerConfig
    from berth.scheduler.settings import SelectionSettings

    placement = PlacementClient(settings.placement, settings.placement_token, roles=settings.placement_roles)
    aliases = pci_aliases(settings.pci_aliases)
    return ControlPlane(
        settings.database,
        placement,
        scheduler_config=SchedulerConfig(
            pci_aliases={a.name: a for a in aliases}, max_placement_results=settings.max_placement_results
        ),
        selection=SelectionSettings(host_subset_size=settings.host_subset_size),
        conductor_config=ConductorConfig(
            max_attempts=settings.max_attempts,
            heartbeat_interval=settings.heartbeat_interval,
            dead_after=settings.dead_after,
        ),
        settings=ControlSettings(
            host_down_after=settings.host_down_after,
            operation_threads=settings.operation_threads,
            housekeeping_interval=settings.heartbeat_interval,
        ),
    )


def pci_aliases(text: str | None) -> list[PciAlias]:
    """The ``--pci-aliases`` list read; SettingsError saying what is wrong with it."""
    from berth.scheduler.errors import ConfigError
    from berth.scheduler.request.flavor import PciAlias

    if not text:
        return []
    try:
        documents: list[dict[str, Any]] = json.loads(text)
        fields: list[dict[str, Any]] = [{**d, "traits": tuple(d.get("traits", ()))} for d in documents]
        return [PciAlias(**f) for f in fields]
    except (ValueError, TypeError, AttributeError, ConfigError) as e:
        raise SettingsError(f"--pci-aliases {text!r}: {e}") from None


@click.command("conductor", help="Run the conductors' servers API (docs/conductor.md).")
@click.option("--config", default=None, metavar="FILE", help="YAML file of settings named like the long options")
@click_options(ConductorSettings)
@click.pass_context
def conductor_command(ctx: click.Context, /, **params: Any) -> int:
    try:
        settings = load_settings(params, os.environ)
        pci_aliases(settings.pci_aliases)
    except SettingsError as error:
        click.UsageError(str(error), ctx).show()
        raise SystemExit(2) from None
    status = run(settings)
    if status:
        raise click.exceptions.Exit(status)
    return status


def run(settings: ConductorSettings) -> int:
    from berth.conductor.migrate import SchemaTooNew
    from berth.web import server

    host = bind_host(settings.bind)
    if settings.auth_strategy == "noauth2" and not is_loopback(host) and not settings.force_insecure:
        print(
            f"berth conductor: refusing to serve the noauth2 development mode on {host}: anyone who can reach it "
            "could act as admin. Bind to a loopback address, choose --auth-strategy tokens or keystone, or pass "
            "--force-insecure.",
            file=sys.stderr,
        )
        return 2

    def prepare() -> None:
        # The database upgraded once, before the workers start (a journal opened upgrades it).
        import sqlalchemy as sa

        from berth.conductor.journal import Journal
        from berth.store.database import DatabaseUnusable, check_url, describe_failure, failed_to_open

        # A URL, or a database, the conductors cannot use: one line (berth.cli.main), as for the service.
        check_url(settings.database)
        try:
            Journal(settings.database).close()
        except sa.exc.DBAPIError as error:
            if not failed_to_open(error):
                raise
            raise DatabaseUnusable(describe_failure(error, settings.database)) from error

    def load_app() -> Any:
        # Imported in the worker: prometheus_client must load after the metrics' folder is chosen.
        from berth.conductor.api.app import ApiSettings, create_app

        plane = control_plane(settings)
        plane.start()
        api = ApiSettings(
            auth_strategy=settings.auth_strategy,
            tokens_file=settings.tokens_file,
            policy_file=settings.policy_file,
            enforce_new_defaults=settings.enforce_new_defaults,
            metrics=settings.metrics,
            cors_allowed_origins=settings.cors_allowed_origin,
        )
        return create_app(plane, api)

    try:
        return server.serve(
            target="berth.conductor.api.app:create_app",
            load_app=load_app,
            prepare=prepare,
            bind=settings.bind,
            workers=settings.workers,
            threads=settings.threads,
            access_log=settings.access_log,
            log_format=settings.log_format,
            metrics=settings.metrics != "off",
        )
    except SchemaTooNew as error:
        print(f"berth conductor: {error}", file=sys.stderr)
        return 1
    except server.AddressInUse:
        print(
            f"berth conductor: cannot listen on {settings.bind}: Address already in use by another process; "
            "stop it or choose another --bind.",
            file=sys.stderr,
        )
        return 1
