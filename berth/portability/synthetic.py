"""A synthetic snapshot of a large cloud, written straight into a file, and the timing of its import.

    python -m berth.portability.synthetic --providers 100000 --allocations 1000000 \\
        --database sqlite:///big.sqlite books.jsonl

writes the snapshot (hosts with VCPU, MEMORY_MB and DISK_GB; one consumer per three allocations, each
on one host), upgrades the database, imports the file into it and prints how long each step took.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
import uuid
from typing import IO

from berth.portability.format import KINDS, encode, header
from berth.portability.importer import import_books
from berth.store.database import Database
from berth.store.migrate import upgrade

_HOST = {"VCPU": (64, 16.0), "MEMORY_MB": (262144, 1.5), "DISK_GB": (4096, 1.0)}
_CONSUMER = {"VCPU": 2, "MEMORY_MB": 4096, "DISK_GB": 40}


def _uuid(space: int, number: int) -> str:
    return str(uuid.UUID(int=(space << 96) | number))


def write_snapshot(out: IO[str], providers: int, allocations: int) -> dict[str, int]:
    """A snapshot of ``providers`` hosts and about ``allocations`` allocations (a multiple of three)."""
    consumers = allocations // len(_CONSUMER)
    counts = dict.fromkeys(KINDS, 0)
    counts.update(
        provider=providers,
        inventory=providers * len(_HOST),
        project=1,
        user=1,
        consumer_type=1,
        consumer=consumers,
        allocation=consumers * len(_CONSUMER),
    )
    stamp = datetime.datetime(2026, 1, 1)
    out.write(header(stamp, counts).decode())
    hosts = [_uuid(1, n) for n in range(providers)]
    for n, host in enumerate(hosts):
        out.write(
            encode(
                "provider", {"uuid": host, "name": f"host-{n}", "generation": 1, "parent": None, "root": host}
            ).decode()
        )
    for host in hosts:
        for rc, (total, ratio) in _HOST.items():
            inventory = {"provider": host, "resource_class": rc, "total": total, "reserved": 0}
            inventory.update(min_unit=1, max_unit=total, step_size=1, allocation_ratio=ratio)
            out.write(encode("inventory", inventory).decode())
    out.write(encode("project", {"external_id": "project"}).decode())
    out.write(encode("user", {"external_id": "user"}).decode())
    out.write(encode("consumer_type", {"name": "INSTANCE"}).decode())
    for n in range(consumers):
        record = {"uuid": _uuid(2, n), "project": "project", "user": "user", "consumer_type": "INSTANCE"}
        out.write(encode("consumer", {**record, "generation": 1}).decode())
    for n in range(consumers):
        host = hosts[n % providers] if providers else ""
        for rc, amount in _CONSUMER.items():
            allocation = {"consumer": _uuid(2, n), "provider": host, "resource_class": rc, "used": amount}
            out.write(encode("allocation", allocation).decode())
    return counts


class _SectionClock:
    """How long each section of an import took, from the progress reports."""

    def __init__(self) -> None:
        self.started = self._last = time.perf_counter()
        self.took: dict[str, float] = {}

    def progress(self, kind: str, done: int, total: int) -> None:
        if done == total and kind not in self.took:
            now = time.perf_counter()
            self.took[kind] = now - self._last
            self._last = now


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file")
    parser.add_argument("--providers", type=int, default=100_000)
    parser.add_argument("--allocations", type=int, default=1_000_000)
    parser.add_argument("--database", help="a new, empty database to import into (SQLAlchemy URL)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with open(args.file, "w", encoding="utf-8") as out:
        counts = write_snapshot(out, args.providers, args.allocations)
    took = time.perf_counter() - started
    print(f"wrote {counts['provider']} providers, {counts['allocation']} allocations in {took:.1f} s")
    if args.database:
        db = Database(args.database)
        try:
            upgrade(db)
            sections = _SectionClock()
            with open(args.file, encoding="utf-8") as inp:
                import_books(db, inp, progress=sections.progress)
            took = time.perf_counter() - sections.started
        finally:
            db.dispose()
        print(
            f"imported in {took:.1f} s: {counts['provider'] / took:,.0f} providers/s and "
            f"{counts['allocation'] / took:,.0f} allocations/s of the whole import"
        )
        for kind, seconds in sections.took.items():
            if counts[kind]:
                print(f"  {kind}: {counts[kind]:,} in {seconds:.2f} s, {counts[kind] / seconds:,.0f}/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
