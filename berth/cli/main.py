"""The ``berth`` command."""
from __future__ import annotations

import argparse
import logging
import os
import sys

from berth.api.app import Settings
from berth.store.database import Database, default_url

DEFAULT_BIND = "127.0.0.1:8778"


def _add_database_option(parser):
    parser.add_argument(
        "--database", default=None,
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


def cmd_serve(args) -> int:
    from berth.api.server import serve
    from berth.api.wsgi import settings_from_environment

    settings = settings_from_environment()
    settings = Settings(
        max_candidates=args.max_candidates or settings.max_candidates,
        randomize_candidates=args.randomize_candidates or settings.randomize_candidates,
    )
    return serve(
        bind=args.bind, database_url=args.database or default_url(), workers=args.workers,
        threads=args.threads, access_log=args.access_log, settings=settings,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="berth", description="Berth: the resource books of a cloud.")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the Placement-compatible API")
    serve.add_argument("--bind", default=DEFAULT_BIND, help=f"address:port to listen on (default {DEFAULT_BIND})")
    _add_database_option(serve)
    serve.add_argument("--workers", type=int, default=min(4, (os.cpu_count() or 1) * 2),
                       help="worker processes (default: 2 x cores, at most 4)")
    serve.add_argument("--threads", type=int, default=1, help="threads per worker (default 1)")
    serve.add_argument("--access-log", action="store_true", help="log every request")
    serve.add_argument("--max-candidates", type=int, default=None,
                       help="most allocation candidates generated for one request, whatever its limit "
                            "(default 1000; also $BERTH_MAX_CANDIDATES)")
    serve.add_argument("--randomize-candidates", action="store_true",
                       help="return allocation candidates in random order instead of provider order "
                            "(also $BERTH_RANDOMIZE_CANDIDATES=1)")
    serve.set_defaults(func=cmd_serve)

    db = sub.add_parser("db", help="database administration")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    upgrade = db_sub.add_parser("upgrade", help="create or upgrade the schema and load the standard names")
    _add_database_option(upgrade)
    upgrade.set_defaults(func=cmd_db_upgrade)
    return parser


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
