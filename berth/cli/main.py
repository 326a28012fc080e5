"""The ``berth`` command."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import sys

from berth.api.app import Settings
from berth.cli import agent, bench, stress
from berth.cli.harness import DEFAULT_WORKERS
from berth.store.database import Database, default_url

DEFAULT_BIND = "127.0.0.1:8778"


def _add_database_option(parser):
    parser.add_argument(
        "--database",
        default=None,
        help="SQLAlchemy database URL (default: $BERTH_DATABASE_URL, else a SQLite file "
        "berth.sqlite in the current folder)",
    )


def cmd_db_upgrade(args) -> int:
    from berth.store.migrate import upgrade

    db = Database(args.database or default_url())
    upgrade(db)
    db.dispose()
    print(f"database at {db.engine.url.render_as_string(hide_password=True)} is up to date")
    return 0


SERVE_CONFIG_KEYS = {
    "bind",
    "database",
    "workers",
    "threads",
    "auth_strategy",
    "tokens_file",
    "policy_file",
    "enforce_new_defaults",
    "cors_allowed_origin",
    "cors_allow_headers",
    "max_candidates",
    "randomize_candidates",
    "provider_cache_size",
    "force_insecure",
}


def load_serve_config(path: str | None) -> dict:
    """The YAML configuration file of ``berth serve``: the options' long names as keys."""
    if not path:
        return {}
    import yaml

    with open(path, encoding="utf-8") as handle:
        config = yaml.safe_load(handle) or {}
    config = {key.replace("-", "_"): value for key, value in config.items()}
    unknown = sorted(set(config) - SERVE_CONFIG_KEYS)
    if unknown:
        raise SystemExit(f"{path}: unknown settings {', '.join(unknown)}")
    return config


def _as_tuple(value) -> tuple[str, ...]:
    if isinstance(value, str):
        value = value.split(",")
    return tuple(v.strip() for v in value or () if v.strip())


def cmd_serve(args) -> int:
    from berth.api.server import serve
    from berth.api.wsgi import settings_from_environment

    config = load_serve_config(args.config)
    env = settings_from_environment()

    def pick(name, env_value=None, default=None):
        """The command line wins, then the configuration file, then the environment."""
        value = getattr(args, name)
        if value not in (None, False, []):
            return value
        if name in config:
            return config[name]
        return env_value if env_value not in (None, False, ()) else default

    settings = Settings(
        max_candidates=int(pick("max_candidates", env.max_candidates)),
        randomize_candidates=bool(pick("randomize_candidates", env.randomize_candidates)),
        # Not through pick: 0 (no cache) is a value of its own, not "not given".
        provider_cache_size=int(
            args.provider_cache_size
            if args.provider_cache_size is not None
            else config.get("provider_cache_size", env.provider_cache_size)
        ),
        auth_strategy=pick("auth_strategy", env.auth_strategy),
        tokens_file=pick("tokens_file", env.tokens_file),
        policy_file=pick("policy_file", env.policy_file),
        enforce_new_defaults=bool(pick("enforce_new_defaults", env.enforce_new_defaults)),
        cors_allowed_origins=_as_tuple(pick("cors_allowed_origin", env.cors_allowed_origins)),
        cors_allow_headers=_as_tuple(pick("cors_allow_headers", env.cors_allow_headers)),
    )
    bind = pick("bind", default=DEFAULT_BIND)
    host = bind.rsplit(":", 1)[0].strip("[]")
    if settings.auth_strategy == "noauth2" and not _is_loopback(host) and not pick("force_insecure"):
        print(
            f"refusing to serve the noauth2 development mode on {host}: anyone who can reach it could "
            "act as admin. Bind to a loopback address, choose --auth-strategy tokens or keystone, "
            "or pass --force-insecure.",
            file=sys.stderr,
        )
        return 2
    return serve(
        bind=bind,
        database_url=pick("database", default=default_url()),
        workers=int(pick("workers", default=DEFAULT_WORKERS)),
        threads=int(pick("threads", default=1)),
        access_log=args.access_log,
        settings=settings,
    )


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="berth", description="Berth: the resource books of a cloud.")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the Placement-compatible API")
    serve.add_argument(
        "--config",
        default=None,
        help="YAML file of settings named like the long options (auth_strategy, "
        "policy_file, cors_allowed_origin, ...); the command line wins over it",
    )
    serve.add_argument("--bind", default=None, help=f"address:port to listen on (default {DEFAULT_BIND})")
    _add_database_option(serve)
    serve.add_argument("--workers", type=int, default=None, help="worker processes (default: cores + 1, at most 4)")
    serve.add_argument("--threads", type=int, default=None, help="threads per worker (default 1)")
    serve.add_argument("--access-log", action="store_true", help="log every request")
    serve.add_argument(
        "--max-candidates",
        type=int,
        default=None,
        help="most allocation candidates generated for one request, whatever its limit "
        "(default 1000; also $BERTH_MAX_CANDIDATES)",
    )
    serve.add_argument(
        "--randomize-candidates",
        action="store_true",
        help="return allocation candidates in random order instead of provider order "
        "(also $BERTH_RANDOMIZE_CANDIDATES=1)",
    )
    serve.add_argument(
        "--provider-cache-size",
        type=int,
        default=None,
        help="providers whose candidate data each worker keeps between requests, each "
        "checked against the database before use (default 10000, 0 for none; also "
        "$BERTH_PROVIDER_CACHE_SIZE)",
    )
    serve.add_argument(
        "--auth-strategy",
        choices=["noauth2", "tokens", "keystone"],
        default=None,
        help="how callers are identified (default noauth2; also $BERTH_AUTH_STRATEGY)",
    )
    serve.add_argument(
        "--tokens-file",
        default=None,
        help="YAML file of tokens and their users, projects and roles, for --auth-strategy "
        "tokens (also $BERTH_TOKENS_FILE)",
    )
    serve.add_argument(
        "--policy-file",
        default=None,
        help="oslo.policy rules (YAML or JSON) overriding the defaults by Placement's rule "
        "names (also $BERTH_POLICY_FILE)",
    )
    serve.add_argument(
        "--enforce-new-defaults",
        action="store_true",
        help="use the secure RBAC defaults instead of the legacy admin-only ones (also $BERTH_ENFORCE_NEW_DEFAULTS=1)",
    )
    serve.add_argument(
        "--cors-allowed-origin",
        action="append",
        default=[],
        help="origin allowed to make cross-site requests; repeatable "
        "(also $BERTH_CORS_ALLOWED_ORIGIN, comma-separated)",
    )
    serve.add_argument(
        "--cors-allow-headers",
        default=None,
        help="extra request headers allowed in cross-site requests, comma-separated (also $BERTH_CORS_ALLOW_HEADERS)",
    )
    serve.add_argument(
        "--force-insecure", action="store_true", help="allow the noauth2 development mode on a non-loopback address"
    )
    serve.set_defaults(func=cmd_serve)

    db = sub.add_parser("db", help="database administration")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    upgrade = db_sub.add_parser("upgrade", help="create or upgrade the schema and load the standard names")
    _add_database_option(upgrade)
    upgrade.set_defaults(func=cmd_db_upgrade)

    bench_parser = sub.add_parser("bench", help="benchmark a server over HTTP (see docs/performance.md)")
    bench.add_bench_arguments(bench_parser)
    bench_parser.set_defaults(func=bench.run)

    stress_parser = sub.add_parser("stress", help="race claimers, inject faults, audit (see docs/reliability.md)")
    stress.add_stress_arguments(stress_parser)
    stress_parser.set_defaults(func=stress.run)

    agent_parser = sub.add_parser("agent", help="run the resource tracker of one host (see docs/tracker.md)")
    agent.add_agent_arguments(agent_parser)
    agent_parser.set_defaults(func=agent.run)
    return parser


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
