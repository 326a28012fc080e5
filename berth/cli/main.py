"""The ``berth`` command."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from berth.cli import agent, bench, serve, stress
from berth.store.database import Database, default_url


def _add_database_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database",
        default=None,
        help="SQLAlchemy database URL (default: $BERTH_DATABASE_URL, else a SQLite file "
        "berth.sqlite in the current folder)",
    )


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    from berth.store.migrate import upgrade

    db = Database(args.database or default_url())
    upgrade(db)
    db.dispose()
    print(f"database at {db.engine.url.render_as_string(hide_password=True)} is up to date")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="berth", description="Berth: the resource books of a cloud.")
    sub = parser.add_subparsers(dest="command", required=True)

    serve_parser = sub.add_parser("serve", help="run the Placement-compatible API")
    serve.add_serve_arguments(serve_parser)
    serve_parser.set_defaults(func=serve.run)

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


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    status: int = args.func(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
